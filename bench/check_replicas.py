#!/usr/bin/python3
"""bench/check_replicas.py: what --check-replicas costs a checked step.

Each case runs the same job with --check-replicas 1 (every step checked:
the hash of the parameters, one small all-gather; in dp a gather onto
device 0 and a host barrier) and without it, as separate ddpbench processes
in ABBA rounds (a busy minute falls on both).  A check's cost is the run's
own measure of it (--json's replicas.check_s: the wall time of its checks,
rank 0's or device 0's, over their count; they run between the steps,
outside the timed step), and the timed step's median with and without the
checks says that the step itself is unchanged.  It prints per case the
median over the rounds with the range, and the load average before and
after.

Cases: ddp and dp on 2 CPU devices, on mlp-small (301k parameters: the hash
reads 1.2 MB) and on the seed-size model (110 parameters: the exchange
alone).

usage: bench/check_replicas.py [-b BIN] [-r ROUNDS] [-s STEPS]
"""
import argparse
import json
import os
import statistics
import subprocess

CASES = [
    ("ddp mlp-small", "--mode ddp --gpus 0,1 --model mlp-small"),
    ("dp mlp-small", "--mode dp --gpus 0,1 --model mlp-small"),
    ("ddp seed-size", "--mode ddp --gpus 0,1 --layers 10,10 --loss mse --batch 20 --samples 2000"),
    ("dp seed-size", "--mode dp --gpus 0,1 --layers 10,10 --loss mse --batch 20 --samples 2000"),
]


def run(binary, args, steps, check):
    cmd = [binary, "--backend", "cpu", "--steps", str(steps), "--quiet", "--json"] + args.split()
    if check:
        cmd += ["--check-replicas", "1"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return out["replicas"]["check_s"] if check else None, out["step_time_s"]["p50"]


def mid(xs, scale):
    return "%.1f [%.1f .. %.1f]" % (scale * statistics.median(xs), scale * min(xs),
                                    scale * max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-b", default="./ddpbench")
    ap.add_argument("-r", type=int, default=6)
    ap.add_argument("-s", type=int, default=200)
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    for name, args in CASES:
        check, on, off = [], [], []
        for r in range(a.r):
            order = (False, True) if r % 2 == 0 else (True, False)
            t = {c: run(a.b, args, a.s, c) for c in order}
            check.append(t[True][0])
            on.append(t[True][1])
            off.append(t[False][1])
        print("%-14s a check %s us; the step %s us without checks, %s with (median "
              "[range] of %d rounds)" % (name, mid(check, 1e6), mid(off, 1e6), mid(on, 1e6), a.r))
    print("load average %.2f before, %.2f after" % (load0, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
