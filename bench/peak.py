#!/usr/bin/python3
"""bench/peak.py: how close each mode's step comes to the machine, and
PyTorch's beside it.

For each model (mlp-medium: 1024-2048-2048-1024, batch 256, SGD with momentum;
mlp-large: 4096-8192x3-4096, AdamW, at batch 256 here so that a CPU step takes
seconds, not minutes) and each environment (installed: the variables as they
are; unset: OPENBLAS_CORETYPE removed, so OpenBLAS picks the CPU's own
kernels; or a core's name: OPENBLAS_CORETYPE set to it, as a machine may force
it), it runs, as separate processes, in an order rotated round by round (a
busy minute falls on every case):

  ddpbench single (pinned to one CPU with taskset), dp and ddp on 2 CPU
  devices (each device's thread pinned by ddpbench itself), --json;
  PyTorch on the same job, eager, one thread pinned to the same CPU, and two
  threads on both CPUs (its best 2-core configuration here).

It prints per case the median over the rounds of samples/s, GFLOP/s per
device and the share of the device's peak (the peak ddpbench measures in the
run: an FMA loop on the device's core; PyTorch's share is against the peak its
round's ddpbench single measured on the same CPU), with the range; the FLOPs
are counted from the model as ddpbench counts them (docs/results.md). For
ddpbench's modes it adds the cores other processes took during the runs
(median) and how many runs its own record calls disturbed. Where a
ddpbench mode falls short of its goal (single >= 80% of the peak, dp and ddp
>= 70% per device), the phase that holds it back: forward and backward's own
share of the peak, and the phases that do no GEMM, longest first. Then
ddpbench against PyTorch (single / 1 thread; best mode / 2 threads) and dp's
and ddp's speed-up over single (goals 1.5x and 1.8x). The load average
before, at each run's start (least and most) and after.

usage: bench/peak.py [-b BIN] [-r ROUNDS] [-m MODELS] [-e ENVS] [-s STEPS] [-q CORES [-w S]]
                     [-o OUT.json] [-g]
  -m  models, comma-separated [mlp-medium,mlp-large]
  -e  environments, comma-separated: installed, unset, or a core name [installed,unset]
  -s  timed steps of mlp-medium (mlp-large runs a fifth of them, at least 4) [20]
  -q  before each run, wait until the machine keeps at most CORES cores busy
      (/proc/stat over 2 s; at most -w seconds, 900): the goals are a quiet
      machine's
  -g  exit 1 when a goal is not met
Needs Debian's python3 with PyTorch (scripts/deps.sh test installs it).
"""
import argparse
import json
import os
import statistics as st
import subprocess
import sys
import time

MODELS = {  # what ddpbench's presets are, for PyTorch; large at batch 256
    "mlp-medium": {"layers": [1024, 2048, 2048, 1024], "act": "relu", "opt": "sgd", "batch": 256},
    "mlp-large": {"layers": [4096, 8192, 8192, 8192, 4096], "act": "gelu", "opt": "adamw",
                  "batch": 256},
}
GOAL = {"single": 0.80, "dp": 0.70, "ddp": 0.70}
GOAL_SPEEDUP = {"dp": 1.5, "ddp": 1.8}
OPT_FLOPS = {"sgd": 4, "adamw": 16}  # per parameter, as ddpbench counts (SGD with momentum)
GEMM = ("forward_s", "backward_s")


def flops_per_step(m):
    L = m["layers"]
    row = sum((6 if l else 4) * L[l] * L[l + 1] + 2 * L[l + 1] for l in range(len(L) - 1))
    n = sum(L[l] * L[l + 1] + L[l + 1] for l in range(len(L) - 1))
    return m["batch"] * row + OPT_FLOPS[m["opt"]] * n


def torch_child(model, steps, threads):
    import torch
    from torch import nn
    m = MODELS[model]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    L, batch = m["layers"], m["batch"]
    mods = []
    for l in range(len(L) - 1):
        mods.append(nn.Linear(L[l], L[l + 1]))
        if l < len(L) - 2:
            mods.append(nn.ReLU() if m["act"] == "relu" else nn.GELU())
    net = nn.Sequential(*mods)
    opt = (torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9) if m["opt"] == "sgd"
           else torch.optim.AdamW(net.parameters(), lr=1e-4))
    X, Y = torch.randn(8 * batch, L[0]), torch.randn(8 * batch, L[-1])
    times, warm = [], 2
    for i in range(steps + warm):
        t0 = time.perf_counter()
        idx = torch.randint(0, X.shape[0], (batch,))
        loss = nn.functional.mse_loss(net(X[idx]), Y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= warm:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"samples_per_s": len(times) * batch / sum(times), "torch": torch.__version__}))


def environ(env):
    e = dict(os.environ)
    if env != "installed":
        e.pop("OPENBLAS_CORETYPE", None)
    if env not in ("installed", "unset"):
        e["OPENBLAS_CORETYPE"] = env
    return e


def busy_cores(seconds=2.0):
    """The cores the machine kept busy over `seconds` (/proc/stat)."""
    def ticks():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # all, idle + iowait
    a = ticks()
    time.sleep(seconds)
    b = ticks()
    return os.cpu_count() * (1 - (b[1] - a[1]) / max(1, b[0] - a[0]))


def wait_quiet(most, limit_s):
    """Wait until the machine keeps at most `most` cores busy (or limit_s):
    the seconds waited and the cores busy at the end."""
    t0 = time.time()
    busy = busy_cores()
    while busy > most and time.time() - t0 < limit_s:
        busy = busy_cores()
    return time.time() - t0, busy


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def held_back(d):
    """What holds a ddpbench run below its goal: its forward and backward's
    own share of the peak, and the phases that do no GEMM (device 0)."""
    x, n = d["devices"][0], d["steps"]["timed"]
    ph = x["phases_s_per_step"]
    gemm = sum(ph[k] for k in GEMM)
    flops = x["flops_per_s"] * d["timed_s"] / n
    rest = sorted(((v, k[:-2]) for k, v in ph.items() if k not in GEMM + ("comm_hidden_s",)
                   and v > 0), reverse=True)
    return ("forward+backward at %.0f%% of the peak; the rest %.1f of %.1f ms: %s"
            % (100 * flops / gemm / x["peak_flops_per_s"], 1e3 * sum(v for v, _ in rest),
               1e3 * d["step_time_s"]["mean"],
               ", ".join("%s %.1f" % (k, 1e3 * v) for v, k in rest[:4])))


def span(v, fmt):
    return (fmt + " [" + fmt + ".." + fmt + "]") % (st.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-b", default="./ddpbench")
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-m", default="mlp-medium,mlp-large")
    ap.add_argument("-e", default="installed,unset")
    ap.add_argument("-s", type=int, default=20)
    ap.add_argument("-o", default="build/bench/peak.json")
    ap.add_argument("-g", action="store_true")
    ap.add_argument("-q", type=float, default=None)
    ap.add_argument("-w", type=float, default=900)
    ap.add_argument("--torch-child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        torch_child(a.torch_child[0], int(a.torch_child[1]), int(a.torch_child[2]))
        return 0
    cpus = sorted(os.sched_getaffinity(0))
    pin = ["taskset", "-c", str(cpus[-1])]
    cases = []
    for model in a.m.split(","):
        steps = a.s if model == "mlp-medium" else max(4, a.s // 5)
        common = ["--model", model, "--batch", "256", "--samples", "2048", "--backend", "cpu", "--steps",
                  str(steps + 2), "--warmup-steps", "2", "--quiet", "--json"]
        for env in a.e.split(","):
            for mode in ("single", "dp", "ddp"):
                g = ["--gpus", "0"] if mode == "single" else ["--gpus", "0,1"]
                cmd = (pin if mode == "single" else []) + [a.b, "--mode", mode] + g + common
                cases.append((model, env, mode, cmd))
            for th in (1, 2):
                cmd = (pin if th == 1 else []) + [sys.executable, os.path.abspath(__file__),
                                                  "--torch-child", model, str(steps), str(th)]
                cases.append((model, env, "pytorch %d thread%s" % (th, "s" * (th > 1)), cmd))
    res = {c[:3]: [] for c in cases}
    before, seen, waited = os.getloadavg(), [], []
    print("# peak: %d rounds of %d cases, rotated; CPUs %s; load before %.2f %.2f %.2f"
          % (a.r, len(cases), cpus, *before), flush=True)
    for r in range(a.r):
        for model, env, mode, cmd in cases[r % len(cases):] + cases[:r % len(cases)]:
            if a.q is not None:
                waited.append(wait_quiet(a.q, a.w))
            seen.append(os.getloadavg()[0])
            res[(model, env, mode)].append(run(cmd, environ(env)))
        print("# round %d done, load %.2f" % (r + 1, os.getloadavg()[0]), flush=True)
    after = os.getloadavg()
    failed, out = [], []
    print("%-10s %-9s %-17s %26s %24s %18s" % ("model", "env", "case", "samples/s [range]",
                                               "GFLOP/s/device [range]", "share [range]"))
    for model, env, mode in res:
        runs, m = res[(model, env, mode)], MODELS[model]
        sps = [x["samples_per_s"] if "torch" in x else x["throughput_samples_per_s"] for x in runs]
        if mode.startswith("pytorch"):  # against its round's single ddpbench peak, same CPU
            peaks = [x["devices"][0]["peak_flops_per_s"] for x in res[(model, env, "single")]]
            gf = [s / m["batch"] * flops_per_step(m) / 1e9 / (2 if "2" in mode else 1) for s in sps]
            share = [g * 1e9 / p for g, p in zip(gf, peaks)]
        else:
            gf = [x["flops_per_s"] / len(x["devices"]) / 1e9 for x in runs]
            share = [min(y["peak_share"] for y in x["devices"]) for x in runs]
        line = "%-10s %-9s %-17s %26s %24s %18s" % (model, env, mode, span(sps, "%.1f"),
                                                    span(gf, "%.1f"), span([100 * s for s in share], "%.0f%%"))
        if mode in GOAL:  # what else the machine did meanwhile (ddpbench's record)
            others = st.median(x["machine"]["others_cores"] or 0 for x in runs)
            line += "  others %.1f cores, disturbed %d/%d" % (
                others, sum(bool(x["machine"]["disturbed"]) for x in runs), len(runs))
            ok = st.median(share) >= GOAL[mode]
            line += "  goal >= %.0f%%: %s" % (100 * GOAL[mode], "PASS" if ok else "FAIL")
            if not ok:
                failed.append((model, env, mode))
                mid = sorted(runs, key=lambda x: x["peak_share"])[len(runs) // 2]
                line += "\n%50s held back by: %s" % ("", held_back(mid))
        print(line)
        out.append({"model": model, "env": env, "case": mode, "samples_per_s": sps,
                    "gflops_per_device": gf, "share": share})
    for model in a.m.split(","):
        for env in a.e.split(","):
            med = {k[2]: st.median(x["samples_per_s"] if "torch" in x else
                                   x["throughput_samples_per_s"] for x in v)
                   for k, v in res.items() if k[:2] == (model, env)}
            best = max(med[k] for k in ("single", "dp", "ddp"))
            print("%s %s: ddpbench single / pytorch 1 thread %.2fx; best mode / pytorch 2 threads "
                  "%.2fx" % (model, env, med["single"] / med["pytorch 1 thread"],
                             best / med["pytorch 2 threads"]), end="")
            for mode, goal in GOAL_SPEEDUP.items():
                ok = med[mode] / med["single"] >= goal
                print("; %s %.2fx single (goal %.1fx: %s)" % (mode, med[mode] / med["single"], goal,
                                                            "PASS" if ok else "FAIL"), end="")
            print()
    print("load average: before %.2f, at the runs' starts %.2f..%.2f, after %.2f (%d CPUs)"
          % (before[0], min(seen), max(seen), after[0], os.cpu_count()))
    if waited:
        print("each run waited for at most %.1f busy cores (-q): %.0f s in all; busy at the starts "
              "%.2f..%.2f cores; %d runs started busier (-w ran out)"
              % (a.q, sum(w for w, _ in waited), min(b for _, b in waited),
                 max(b for _, b in waited), sum(b > a.q for _, b in waited)))
    os.makedirs(os.path.dirname(a.o) or ".", exist_ok=True)
    with open(a.o + ".tmp", "w") as f:
        json.dump({"rounds": a.r, "cases": out, "load_before": before, "load_after": after,
                   "quiet": a.q, "waited": waited,
                   "load_seen": [min(seen), max(seen)], "runs": {" ".join(k): v for k, v in res.items()}},
                  f, indent=1)
    os.replace(a.o + ".tmp", a.o)
    return 1 if a.g and failed else 0


if __name__ == "__main__":
    sys.exit(main())
