#!/usr/bin/python3
"""bench/fixed_cost.py: what a step costs when it does almost nothing, and
what PyTorch's costs beside it.

On the seed-size model (10,10, MSE, SGD, batch 20: 4,000 multiply-adds a
step) a step is nearly all fixed cost: the step meter's laps, DP's barriers,
DDP's exchange, the calls into OpenBLAS.  This runs, as separate processes,
interleaved round by round in a rotated order, reversed every other round
(ABBA: a busy minute falls on every case, and neither build always runs
first):

  single on the seed-linear preset (the DDP article's demo), dp and ddp (2
  CPU devices) on the seed-size model with bench_stability's seed options,
  each its own ddpbench process, for this build (-b) and, with -B, another
  build beside it (before and after in one run);
  PyTorch on the same single-device job two ways: the --emit-pytorch twin of
  the seed-linear run (the same job as a PyTorch user writes it: a
  DataLoader, the loss read every step; timed as the difference between a
  2,000-step and a 22,000-step run of it, so its start-up cancels), and a
  lean loop (rows gathered from a host tensor, forward, MSE, zero_grad,
  backward, SGD step, nothing else), one thread each.

It prints per case the median over the rounds of each run's median (p50)
step, with the range, the throughput, and the ratios of ddpbench's single
throughput to PyTorch's, round by round (median and range); the load
average before, during (the least and most seen at each run's start) and
after.  Goals: dp's p50 <= 5 us, ddp's p50 <= 2 us, single >= 200x the
twin's throughput.

usage: bench/fixed_cost.py [-b BIN] [-B BASE] [-r ROUNDS] [-o OUT.json] [-s]
  -b BIN     ddpbench [./ddpbench]
  -B BASE    another build, measured beside it in the same rounds
  -r ROUNDS  rounds [5]
  -o FILE    the results as JSON [build/bench/fixed_cost.json]
  -s         exit 1 when a goal of BIN is not met
Needs Debian's python3 with PyTorch (scripts/deps.sh test installs it).
"""
import argparse
import json
import os
import shutil
import statistics as st
import subprocess
import sys
import tempfile
import time

SEED = ["--layers", "10,10", "--loss", "mse", "--optim", "sgd", "--batch", "20",
        "--steps", "30000", "--warmup-steps", "3000"]
SINGLE = ["--mode", "single", "--model", "seed-linear", "--steps", "300000"]
MODES = [("single", None),
         ("dp", ["--mode", "dp", "--gpus", "0,1"] + SEED),
         ("ddp", ["--mode", "ddp", "--gpus", "0,1"] + SEED)]
TWIN_STEPS = (2000, 22000)
GOAL_P50 = {"dp": 5e-6, "ddp": 2e-6}
GOAL_RATIO = 200.0
TORCH_STEPS, TORCH_WARMUP = 20000, 2000


def torch_child():
    """The seed-size single-device step in PyTorch eager on the CPU; prints
    {samples_per_s, p50_step_s, torch}."""
    import torch
    from torch import nn
    torch.set_num_threads(1)  # ddpbench's single runs one BLAS thread
    torch.manual_seed(0)
    n, batch = 400, 20  # the seed-linear preset
    X = torch.rand(n, 10) * 2 - 1
    Y = torch.rand(n, 10) * 2 - 1
    model = nn.Linear(10, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    loss_fn = nn.MSELoss()
    perm, pos = torch.randperm(n), 0
    times = []
    clock = time.perf_counter
    for i in range(TORCH_STEPS):
        t0 = clock()
        if pos + batch > n:
            perm, pos = torch.randperm(n), 0
        idx = perm[pos:pos + batch]
        pos += batch
        x, y = X.index_select(0, idx), Y.index_select(0, idx)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= TORCH_WARMUP:
            times.append(clock() - t0)
    total = sum(times)
    print(json.dumps({"samples_per_s": len(times) * batch / total,
                      "p50_step_s": st.median(times), "torch": torch.__version__}))


def run_ddpbench(binary, args):
    p = subprocess.run([binary, "--backend", "cpu", "--quiet", "--json"] + (args or SINGLE),
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s %s: exit %d: %s" % (binary, " ".join(args), p.returncode,
                                                   p.stderr.strip().splitlines()[-1:]))
    d = json.loads(p.stdout)
    return {"p50_step_s": d["step_time_s"]["p50"],
            "samples_per_s": d["throughput_samples_per_s"]}


def run_torch():
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("pytorch: exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
    return json.loads(p.stdout)


def emit_twins(binary, folder):
    """The --emit-pytorch twins of the seed-linear run at each TWIN_STEPS."""
    paths = []
    for n in TWIN_STEPS:
        path = os.path.join(folder, "twin%d.py" % n)
        subprocess.run([binary, "--backend", "cpu", "--quiet", "--mode", "single", "--model",
                        "seed-linear", "--steps", str(n), "--emit-pytorch", path],
                       check=True, capture_output=True)
        paths.append(path)
    return paths


def run_twin(paths):
    """The twin's samples/s: the longer run's time less the shorter's."""
    secs = []
    for path in paths:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, path], capture_output=True, text=True)
        secs.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise RuntimeError("twin: exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
    steps = TWIN_STEPS[1] - TWIN_STEPS[0]
    dt = secs[1] - secs[0]
    return {"samples_per_s": steps * 20 / dt, "p50_step_s": dt / steps}


def span(v, scale=1.0, fmt="%.2f"):
    return (fmt + " [" + fmt + ".." + fmt + "]") % (st.median(v) * scale, min(v) * scale,
                                                   max(v) * scale)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-b", default="./ddpbench")
    ap.add_argument("-B", default=None)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-o", default="build/bench/fixed_cost.json")
    ap.add_argument("-s", action="store_true")
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        torch_child()
        return 0
    builds = [("this", a.b)] + ([("base", a.B)] if a.B else [])
    for _, b in builds:
        if not os.access(b, os.X_OK):
            print("fixed_cost.py: no ddpbench at %s (run make, or pass -b)" % b, file=sys.stderr)
            return 2
    tmp = tempfile.mkdtemp(prefix="fixed_cost.")
    twins = emit_twins(a.b, tmp)
    cases = [("pytorch twin", "twin", None), ("pytorch loop", "loop", None)]
    for label, b in builds:
        for mode, args in MODES:
            cases.append(("%s %s" % (label, mode), b, args))
    load_before = os.getloadavg()
    seen_load = []
    res = {c[0]: [] for c in cases}
    ratio = {"%s %s" % (label, k): [] for label, _ in builds for k in ("twin", "loop")}
    print("# fixed_cost: %d rounds, %d cases each, rotated, every other round reversed; %d CPUs; load before %.2f %.2f %.2f"
          % (a.r, len(cases), os.cpu_count(), *load_before), flush=True)
    for r in range(a.r):
        order = cases[r % len(cases):] + cases[:r % len(cases)]
        if r % 2:  # ABBA: a build measured first in one round is measured last in the next
            order.reverse()
        got = {}
        for name, b, args in order:
            seen_load.append(os.getloadavg()[0])
            got[name] = (run_twin(twins) if b == "twin" else run_torch() if b == "loop"
                         else run_ddpbench(b, args))
            res[name].append(got[name])
        for label, _ in builds:
            for k in ("twin", "loop"):
                ratio["%s %s" % (label, k)].append(got["%s single" % label]["samples_per_s"] /
                                                   got["pytorch " + k]["samples_per_s"])
        print("# round %d done" % (r + 1), flush=True)
    load_after = os.getloadavg()
    print("%-16s %28s %32s" % ("case", "p50 step, us: median [range]",
                               "samples/s: median [range]"))
    failed = []
    for name, _, _ in cases:
        p50 = [x["p50_step_s"] for x in res[name]]
        tput = [x["samples_per_s"] for x in res[name]]
        mode = name.split()[-1]
        goal = ""
        if name.startswith("this ") and mode in GOAL_P50:
            ok = st.median(p50) <= GOAL_P50[mode]
            goal = "goal p50 <= %.0f us: %s" % (GOAL_P50[mode] * 1e6, "PASS" if ok else "FAIL")
            if not ok:
                failed.append(name)
        print("%-16s %28s %32s  %s" % (name, span(p50, 1e6), span(tput, 1, "%.0f"), goal))
    for key, v in ratio.items():
        goal = ""
        if key == "this twin":
            ok = st.median(v) >= GOAL_RATIO
            goal = " goal >= %.0fx: %s" % (GOAL_RATIO, "PASS" if ok else "FAIL")
            if not ok:
                failed.append("ratio")
        label, k = key.split()
        print("%s single / pytorch %s, throughput: %s%s" % (label, k, span(v, 1, "%.0fx"), goal))
    print("load average: before %.2f, at the runs' starts %.2f..%.2f, after %.2f (%d CPUs)"
          % (load_before[0], min(seen_load), max(seen_load), load_after[0], os.cpu_count()))
    os.makedirs(os.path.dirname(a.o) or ".", exist_ok=True)
    with open(a.o + ".tmp", "w") as f:
        json.dump({"rounds": a.r, "builds": dict(builds), "runs": res, "ratio": ratio,
                   "load_before": load_before, "load_after": load_after,
                   "load_seen": [min(seen_load), max(seen_load)],
                   "torch": res["pytorch loop"][0].get("torch")}, f, indent=1)
    os.replace(a.o + ".tmp", a.o)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if a.s and failed else 0


if __name__ == "__main__":
    sys.exit(main())
