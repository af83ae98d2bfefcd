#!/usr/bin/python3
"""bench/torch_dispatch.py: PyTorch's host cost of one operator, and how much
of it holds the interpreter lock: the two measured constants of --predict
--hardware's launch term (app/predict/hardware/README.md, "launch").

DataParallel runs one Python thread per replica; each launches its
replica's kernels through PyTorch's dispatcher while holding the GIL for the
Python part of every call.  What one operator costs the host, and how much
of that cost two threads cannot share, is measured here on the installed
PyTorch, on the CPU (no GPU is needed: the dispatch is the same code; a GPU
adds cudaLaunchKernel's own few microseconds, which this leaves out).

How: a replica's forward is a stack of 8 nn.Linear(16, 16) + ReLU modules
called from Python on a 1x16 tensor (so the arithmetic is negligible), then
backward and a plain SGD update under no_grad, as a training step.  The
operators one step dispatches are counted once with torch.profiler (every
aten:: event that has no aten:: parent: what Python or autograd called).
A timed run is 2,000 steps; the per-operator cost is its wall time over
its operators.  Then the same work in 2 threads at once (each its own
model, as DP's replicas): the lock's share f = (wall of 2 threads /
wall of 1 thread) - 1 (f = 1: the threads take turns for everything; f = 0:
nothing is serialised).  One thread, then two, then two, then one (ABBA),
for --rounds rounds; the median and range of each, with the load average.

usage: bench/torch_dispatch.py [-r ROUNDS] [-n STEPS] [-o OUT.json]
"""
import argparse
import json
import os
import statistics
import threading
import time

import torch

torch.set_num_threads(1)


def replica():
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def step(model, x):
    loss = model(x).sum()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-1e-3)
            p.grad = None


def ops_per_step():
    model, x = replica(), torch.randn(1, 16)
    step(model, x)
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(model, x)
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    ids = {e.id for e in events}
    top = [e for e in events if not (e.cpu_parent and e.cpu_parent.id in ids
                                     and e.cpu_parent.name.startswith("aten::"))]
    return len(top)


def run(threads, steps):
    models = [(replica(), torch.randn(1, 16)) for _ in range(threads)]
    for m, x in models:
        for _ in range(50):
            step(m, x)
    go = threading.Barrier(threads + 1)

    def work(m, x):
        go.wait()
        for _ in range(steps):
            step(m, x)

    ts = [threading.Thread(target=work, args=mx) for mx in models]
    for t in ts:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", "--rounds", type=int, default=7)
    ap.add_argument("-n", "--steps", type=int, default=2000)
    ap.add_argument("-o", "--out", default="build/bench/torch_dispatch.json")
    a = ap.parse_args()
    ops = ops_per_step()
    one, share, loads = [], [], []
    for r in range(a.rounds):
        loads.append(os.getloadavg()[0])
        w1a = run(1, a.steps)
        w2a = run(2, a.steps)
        w2b = run(2, a.steps)
        w1b = run(1, a.steps)
        w1, w2 = (w1a + w1b) / 2, (w2a + w2b) / 2
        one.append(w1 / (a.steps * ops))
        share.append(w2 / w1 - 1.0)
        print(f"round {r + 1}: {one[-1] * 1e6:.2f} us per operator, 2 threads: "
              f"lock share {share[-1]:.2f} (load {loads[-1]:.2f})", flush=True)
    loads.append(os.getloadavg()[0])
    res = {
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "ops_per_step": ops,
        "steps": a.steps,
        "rounds": a.rounds,
        "op_s": {"median": statistics.median(one), "min": min(one), "max": max(one)},
        "lock_share": {"median": statistics.median(share), "min": min(share),
                       "max": max(share)},
        "load": {"min": min(loads), "max": max(loads)},
    }
    print(f"PyTorch {torch.__version__}: {ops} operators a step; one operator "
          f"{res['op_s']['median'] * 1e6:.2f} us (range {min(one) * 1e6:.2f}-{max(one) * 1e6:.2f}); "
          f"the lock's share with 2 threads {res['lock_share']['median']:.2f} "
          f"(range {min(share):.2f}-{max(share):.2f}); load {min(loads):.2f}-{max(loads):.2f}")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
