#!/usr/bin/env python3
"""tests/gpu/torch_ref.py: ddpbench's single-device training step in PyTorch
eager, on the same GPU, for tests/gpu/check.sh's side-by-side throughput.

The same model (nn.Sequential of Linear layers with the activation between
them, none after the last; GELU is the exact erf form), loss (mean: MSE, or
cross-entropy over integer class labels), optimizer (SGD, Adam or AdamW,
torch.optim with its defaults otherwise), batch, and data path: each step gathers its rows of a
host dataset into one of two pinned buffers and copies them to the GPU
without blocking, as ddpbench's stager does, and reads no loss.  fp32 with
TF32 off, or with --precision bf16 autocast's mixed precision (the forward
pass and the loss under torch.autocast("cuda", torch.bfloat16), backward
outside it, fp32 weights and optimizer: ddpbench's --precision bf16).  Throughput is measured like ddpbench's: the timed steps after
the warm-up, from the end of the warm-up to the end of the last step, on the
GPU's own clock (events), so a wall-clock gap between steps counts.

    torch_ref.py --layers 1024,2048,2048,1024 --act relu --loss mse \\
        --optim sgd --lr 0.01 --momentum 0.9 --batch 256 --steps 60 --warmup 10

    torch_ref.py --cases FILE     one line of the options above per model, run
                                  in one process (one import, one CUDA start)

Prints one JSON object per model: name, samples_per_s, step_s, steps, batch,
torch, device, and with --gemms gemm_s (the step's GEMMs timed alone).  Exit 2 on bad arguments, 1 when PyTorch or the GPU is missing
(or a case failed: the others still run and print).
"""
import argparse
import json
import shlex
import sys


def parser():
    p = argparse.ArgumentParser(description="ddpbench's step in PyTorch eager")
    p.add_argument("--name", default="", help="a label echoed in the output")
    p.add_argument("--cases", help="a file of option lines, one model each")
    p.add_argument("--layers", help="widths, input first: 1024,2048,1024")
    p.add_argument("--act", default="relu", choices=["relu", "tanh", "sigmoid", "gelu"])
    p.add_argument("--loss", default="mse", choices=["mse", "ce"])
    p.add_argument("--optim", default="sgd", choices=["sgd", "adam", "adamw"])
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--gemms", action="store_true",
                   help="also time the step's GEMMs alone (gemm_s: their sum per step)")
    return p


def check(p, a):
    if not a.layers:
        p.error("--layers is required")
    try:
        a.dims = [int(d) for d in a.layers.split(",")]
    except ValueError:
        p.error("--layers: comma-separated widths")
    if len(a.dims) < 2 or min(a.dims) < 1 or a.batch < 1 or a.steps <= a.warmup or a.warmup < 0:
        p.error("need two widths or more, --batch >= 1 and --steps > --warmup >= 0")
    return a


def main():
    p = parser()
    a = p.parse_args()
    cases = []
    if a.cases:
        with open(a.cases) as f:
            for line in f:
                if line.strip():
                    c = p.parse_args(shlex.split(line))
                    cases.append(check(p, c))
    else:
        cases.append(check(p, a))
    try:
        import torch
    except ImportError as e:
        print(f"torch_ref.py: PyTorch is not installed: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_ref.py: PyTorch sees no GPU", file=sys.stderr)
        return 1
    status = 0
    for c in cases:
        try:
            print(json.dumps(run(torch, c)), flush=True)
        except Exception as e:  # one model's failure (out of memory) does not hide the others'
            print(f"torch_ref.py: {c.name or c.layers}: {type(e).__name__}: {e}", file=sys.stderr)
            status = 1
    return status


def run(torch, a):
    from torch import nn
    # fp32, as ddpbench's default: no TF32 in matmuls or convolutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)
    torch.manual_seed(a.seed)

    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid,
            "gelu": lambda: nn.GELU(approximate="none")}  # exact GELU, as ddpbench's erf form
    mods = []
    for i in range(len(a.dims) - 1):
        mods.append(nn.Linear(a.dims[i], a.dims[i + 1]))
        if i < len(a.dims) - 2:
            mods.append(acts[a.act]())
    model = nn.Sequential(*mods).to(dev)
    params = model.parameters()
    if a.optim == "sgd":
        wd = a.weight_decay if a.weight_decay is not None else 0.0
        opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=wd)
    elif a.optim == "adam":
        wd = a.weight_decay if a.weight_decay is not None else 0.0
        opt = torch.optim.Adam(params, lr=a.lr, weight_decay=wd)
    else:
        wd = a.weight_decay if a.weight_decay is not None else 0.01
        opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=wd)
    loss_fn = nn.MSELoss() if a.loss == "mse" else nn.CrossEntropyLoss()

    # The host dataset and the staging: rows gathered into one of two pinned
    # buffers, copied without blocking; a buffer is refilled only after the
    # copy that read it has finished (its event), as ddpbench's stager does.
    n_in, n_out = a.dims[0], a.dims[-1]
    X = torch.rand(a.samples, n_in) * 2 - 1
    if a.loss == "mse":
        Y = torch.rand(a.samples, n_out) * 2 - 1
        ylike = dict(size=(a.batch, n_out), dtype=torch.float32)
    else:  # class ids (int64, as CrossEntropyLoss takes them)
        Y = torch.randint(0, n_out, (a.samples,), dtype=torch.int64)
        ylike = dict(size=(a.batch,), dtype=torch.int64)
    hx = [torch.empty(a.batch, n_in).pin_memory() for _ in range(2)]
    hy = [torch.empty(**ylike).pin_memory() for _ in range(2)]
    copied = [None, None]
    gx = torch.empty(a.batch, n_in, device=dev)
    gy = torch.empty(**ylike, device=dev)
    perm = torch.randperm(a.samples)
    pos = 0

    def step(i):
        nonlocal perm, pos
        if pos + a.batch > a.samples:
            perm, pos = torch.randperm(a.samples), 0
        idx = perm[pos:pos + a.batch]
        pos += a.batch
        b = i & 1
        if copied[b] is not None:
            copied[b].synchronize()
        torch.index_select(X, 0, idx, out=hx[b])
        torch.index_select(Y, 0, idx, out=hy[b])
        gx.copy_(hx[b], non_blocking=True)
        gy.copy_(hy[b], non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        copied[b] = ev
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            out = model(gx)
            loss = loss_fn(out, gy)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for i in range(a.warmup):
        step(i)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    timed = a.steps - a.warmup
    for i in range(a.warmup, a.steps):
        step(i)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3
    out = {
        "name": a.name,
        "samples_per_s": timed * a.batch / seconds,
        "step_s": seconds / timed,
        "steps": timed,
        "batch": a.batch,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(dev),
        "tf32": False,
        "precision": a.precision,
    }
    if a.gemms:
        out["gemm_s"] = gemms_alone(torch, a, dev)
    return out


def gemms_alone(torch, a, dev, reps=10):
    """The step's GEMMs alone, back to back on the GPU, each with its own
    operands already there: per layer (in -> out, batch B) the forward
    [B,in]x[in,out], the weight gradient [out,B]x[B,in] and, except for the
    first layer, the input gradient [B,out]x[out,in].  cuBLAS through
    torch.mm, fp32 with TF32 off, or bf16 inputs (bf16 out: ddpbench's
    cublasGemmEx writes fp32, the same tensor-core work).  The sum of their
    times per step, the mean of reps repetitions after one warm-up, on the
    GPU's clock (events)."""
    dt = torch.bfloat16 if a.precision == "bf16" else torch.float32
    B = a.batch
    shapes = []
    for l in range(len(a.dims) - 1):
        i, o = a.dims[l], a.dims[l + 1]
        shapes.append((B, i, o))      # y = x W^T
        shapes.append((o, B, i))      # dW = dy^T x
        if l > 0:
            shapes.append((B, o, i))  # dx = dy W
    ops = [(torch.rand(m, k, device=dev, dtype=dt), torch.rand(k, n, device=dev, dtype=dt),
            torch.empty(m, n, device=dev, dtype=dt)) for m, k, n in shapes]
    for x, y, z in ops:
        torch.mm(x, y, out=z)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        for x, y, z in ops:
            torch.mm(x, y, out=z)
    end.record()
    end.synchronize()
    del ops
    return start.elapsed_time(end) / 1e3 / reps


if __name__ == "__main__":
    sys.exit(main())
