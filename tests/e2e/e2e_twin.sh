#!/bin/sh
# tests/e2e/e2e_twin.sh: --emit-pytorch, the PyTorch twin of a run.  The script
# is run under PyTorch on the CPU (single; nn.DataParallel, which without a GPU
# calls the module on the whole batch; DDP over gloo with spawned ranks) and
# its final parameters must match ddpbench's to 1e-4 relative; a twin with
# one hyper-parameter changed must not.  Its text must parse as Python and
# name every hyper-parameter; jobs without a twin are input errors.  Under
# --precision bf16 the twin runs autocast and agrees within the bf16 tolerance.
# Usage: sh tests/e2e/e2e_twin.sh ./ddpbench
E2E=e2e_twin
. "$(dirname "$0")/lib.sh"

PY=
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy, torch' >/dev/null 2>&1; then
        PY=$p
        break
    fi
done
[ -n "$PY" ] || ko "python3 with numpy and torch is not installed (scripts/deps.sh test installs it)"

# the largest |a - b| / max(|a|, |b|, 1e-3) over every tensor of two weight files
cat >"$T/diff.py" <<'EOF'
import json, struct, sys
import numpy as np

def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4")
            for k, v in h.items() if k != "__metadata__"}

a, b = read(sys.argv[1]), read(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
if len(sys.argv) > 3:  # the relative L2 distance of the whole vectors
    x = np.concatenate([a[k] for k in sorted(a)]).astype(np.float64)
    y = np.concatenate([b[k] for k in sorted(a)]).astype(np.float64)
    print("%.3g" % (np.linalg.norm(x - y) / np.linalg.norm(x)))
else:  # the worst single parameter
    print("%.3g" % max(float(np.max(np.abs(a[k] - b[k]) / np.maximum(np.maximum(np.abs(a[k]), np.abs(b[k])), 1e-3)))
                       for k in a))
EOF

# twin NAME MODE_OPTIONS...: ddpbench writes the twin and its final weights; the
# twin runs and writes its own; they must agree to 1e-4.
twin() {
    name=$1
    shift
    "$BIN" --backend cpu --quiet "$@" --emit-pytorch "$T/$name.py" --save "$T/$name.dd.safetensors" \
        >"$T/$name.out" 2>&1 || { ko "$name: ddpbench: $(tail -3 "$T/$name.out")"; return; }
    for f in "$name.py" "$name.init.safetensors" "$name.x.npy" "$name.y.npy" "$name.order.npy"; do
        [ -s "$T/$f" ] || ko "$name: no $f"
    done
    [ -n "$PY" ] || return
    t0=$(date +%s)
    (cd "$T" && "$PY" "$name.py" --save "$name.tw.safetensors") >"$T/$name.tw" 2>&1 ||
        { ko "$name: the twin failed: $(tail -5 "$T/$name.tw")"; return; }
    d=$("$PY" "$T/diff.py" "$T/$name.dd.safetensors" "$T/$name.tw.safetensors")
    awk -v d="$d" 'BEGIN { exit !(d <= 1e-4) }' && ok ||
        ko "$name: the twin's parameters differ from ddpbench's by $d (over 1e-4)"
    # the same final loss and checksum line, to print precision
    l1=$(awk '/final loss/ { print $3 }' "$T/$name.out")
    l2=$(awk '/final loss/ { print $3 }' "$T/$name.tw")
    awk -v a="$l1" -v b="$l2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * (a < 0 ? -a : a) + 1e-6) }' &&
        ok || ko "$name: final loss $l1 (ddpbench) vs $l2 (twin)"
    grep -q "checksum *sum" "$T/$name.tw" && ok || ko "$name: the twin printed no checksum line"
    echo "e2e_twin: $name: ddpbench and its twin agree to $d in $(($(date +%s) - t0)) s ($(head -1 "$T/$name.tw"))"
}

# single: mlp-small (GELU, CE) with SGD and momentum over 12 steps
twin single --mode single --model mlp-small --steps 12 --optim sgd --lr 0.05 --momentum 0.9
# DP on 3 devices: MSE, SGD with Nesterov momentum and weight decay, --accum 2,
# two epochs, a short last batch (100 samples in micro-batches of 16)
twin dp --mode dp --gpus 0,1,2 --layers 12,32,16,4 --act tanh --loss mse --optim sgd --lr 0.05 \
    --momentum 0.9 --nesterov --weight-decay 0.01 --samples 100 --batch 16 --accum 2 --epochs 2
# DDP on 2 ranks over gloo: BCE and AdamW, DistributedSampler padding (101
# samples), --drop-last, --accum 2, tiny buckets, two epochs of a new order
twin ddp --mode ddp --gpus 0,1 --layers 10,24,1 --act sigmoid --loss bce --optim adamw --lr 0.01 \
    --samples 101 --batch 12 --accum 2 --drop-last --epochs 2 --bucket-mb 0.001 --first-bucket-mb 0.001

# mlp-small as it comes, with Adam: Adam's update m/(sqrt(v)+eps) turns rounding in
# near-zero gradients into visible steps (README: the equivalence contract), so
# the vector is judged by its relative L2 distance, as compare judges it.
if [ -n "$PY" ]; then
    "$BIN" --backend cpu --quiet --mode single --model mlp-small --steps 12 --emit-pytorch "$T/adam.py" \
        --save "$T/adam.dd.safetensors" >/dev/null 2>&1 &&
        (cd "$T" && "$PY" adam.py --save adam.tw.safetensors) >"$T/adam.tw" 2>&1 || ko "adam: the twin failed"
    l2=$("$PY" "$T/diff.py" "$T/adam.dd.safetensors" "$T/adam.tw.safetensors" l2)
    awk -v d="$l2" 'BEGIN { exit !(d <= 1e-5) }' && ok || ko "adam: relative L2 distance $l2 (over 1e-5)"
    echo "e2e_twin: adam (mlp-small as it comes): relative L2 distance $l2"
fi

# --precision bf16: the twin runs under torch.autocast(bfloat16) and must end
# within the bf16 tolerance (1e-3 relative L2, docs/gpu.md) of ddpbench's CPU
# reference; an fp32 run ends 3.7e-3 away, so a twin that ignored autocast
# (or a ddpbench that ignored bf16) fails.  One PyTorch run: the fp32 side is
# ddpbench's own.
if [ -n "$PY" ]; then
    B16="--backend cpu --quiet --mode single --layers 64,128,128,10 --act gelu --loss ce --optim adam \
        --lr 0.003 --dataset classes --samples 2048 --batch 256 --steps 12"
    # shellcheck disable=SC2086 # an option list
    "$BIN" $B16 --precision bf16 --emit-pytorch "$T/bf16.py" --save "$T/bf16.dd.safetensors" >/dev/null 2>&1 &&
        "$BIN" $B16 --precision fp32 --save "$T/fp32.dd.safetensors" >/dev/null 2>&1 &&
        (cd "$T" && "$PY" bf16.py --save bf16.tw.safetensors) >"$T/bf16.tw" 2>&1 || ko "bf16: the twin failed"
    grep -q '^PRECISION *= "bf16"' "$T/bf16.py" && ok || ko "bf16: the twin does not say PRECISION = \"bf16\""
    l2=$("$PY" "$T/diff.py" "$T/bf16.dd.safetensors" "$T/bf16.tw.safetensors" l2)
    awk -v d="$l2" 'BEGIN { exit !(d <= 1e-3) }' && ok || ko "bf16: relative L2 distance $l2 (over 1e-3)"
    f=$("$PY" "$T/diff.py" "$T/fp32.dd.safetensors" "$T/bf16.tw.safetensors" l2)
    awk -v d="$f" 'BEGIN { exit !(d > 3e-3) }' && ok || ko "bf16: the twin ends only $f from fp32: no autocast?"
    echo "e2e_twin: bf16 (autocast): relative L2 distance $l2 from ddpbench's bf16, $f from its fp32"
fi

# The check can fail: the same twin with another learning rate does not match.
if [ -n "$PY" ] && [ -s "$T/single.py" ]; then
    sed 's/^LR  *= .*/LR = 0.01/' "$T/single.py" >"$T/wrong.py"
    (cd "$T" && "$PY" wrong.py --save wrong.tw.safetensors) >/dev/null 2>&1
    d=$("$PY" "$T/diff.py" "$T/single.dd.safetensors" "$T/wrong.tw.safetensors")
    awk -v d="$d" 'BEGIN { exit !(d > 1e-4) }' && ok || ko "a twin with another --lr still agrees ($d)"
fi

# The text: it parses as Python and names every hyper-parameter with its option.
s="$T/ddp.py"
if [ -n "$PY" ]; then
    "$PY" -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$s" && ok || ko "ddp.py does not parse"
fi
for k in "MODE *= \"ddp\"" "WORLD *= 2" "LAYERS *= \[10, 24, 1\]" "ACT *= \"sigmoid\"" "LOSS *= \"bce\"" \
    "OPTIM *= \"adamw\"" "LR *= 0.01 " "MOMENTUM *= 0 " "DAMPENING *= 0 " "NESTEROV *= False" \
    "WEIGHT_DECAY *= 0.01 " "BETA1 *= 0.9 " "BETA2 *= 0.999 " "EPS *= 1e-08 " "BATCH *= 12 " \
    "ACCUM *= 2 " "STEPS *= " "REPLICAS *= 2 " "SHUFFLE *= True" "DROP_LAST *= True" "SEED *= 0 " \
    "BUCKET_MB *= 0.001 " "DistributedDataParallel" "no_sync" "init_process_group" "--emit-pytorch"; do
    grep -q -- "$k" "$s" && ok || ko "ddp.py does not have '$k'"
done
# On a GPU the ranks meet over NCCL, which all-reduces CUDA tensors only: the
# loss the ranks add up must live on the rank's device (gloo here takes either).
grep -q "loss_sum = torch.zeros((), dtype=torch.float64, device=device)" "$s" && ok ||
    ko "ddp.py all-reduces its loss from host memory (NCCL refuses it)"
grep -q "loss_sum +=.*cpu()" "$s" && ko "ddp.py moves the loss to the host" || ok
# On GPUs the twin runs on --gpus' devices, not on the first WORLD of them.
grep -q "^GPUS *= \[0, 1\]" "$s" && ok || ko "ddp.py does not name --gpus' devices"
grep -q 'cuda:{GPUS\[rank\]}' "$s" && grep -q "device_ids=GPUS" "$s" && ok ||
    ko "ddp.py places its ranks by rank number, not on --gpus' devices"

# What has no twin, refused before training (exit 2, one line).
expect_error "--emit-pytorch: the script runs one mode" --backend cpu --mode compare --emit-pytorch "$T/c.py"
expect_error "needs a global batch its 2 ranks divide" --backend cpu --mode ddp --gpus 0,1 --batch 25 \
    --emit-pytorch "$T/b.py"
expect_error "must end in .py" --backend cpu --mode single --emit-pytorch "$T/x.txt"
expect_error "--emit-pytorch: not with --zero" --backend cpu --mode ddp --gpus 0,1 --zero1 \
    --emit-pytorch "$T/z.py"
expect_error "--emit-pytorch" --backend cpu --mode single --emit-pytorch "$T/no/such/dir/t.py"
[ -e "$T/c.py" ] || [ -e "$T/b.py" ] && ko "a refused twin left a file" || ok

e2e_finish
