#!/bin/sh
# bench/bf16_tolerance.sh: the measurement behind --precision bf16's
# tolerances (docs/gpu.md, "bf16"): for a few jobs and seeds, how far apart
# the final parameters of single, dp and ddp end in bf16 (CPU, and the
# emulated GPU against the CPU when build/cuda-emu/ddpbench exists), beside
# how far bf16 ends from fp32 (the effect a bf16 test must be able to see).
# Two figures per pair: the worst parameter (|a-b| / max(|a|,|b|,1e-3)) and
# the relative L2 distance of the whole parameter vector.
# Usage: sh bench/bf16_tolerance.sh [./ddpbench] [seeds]   (needs python3 + numpy)
set -eu
bin=${1:-./ddpbench}
seeds=${2:-"0 1 2"}
emu=build/cuda-emu/ddpbench
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3
cat >"$T/diff.py" <<'PYEOF'
import json, struct, sys
import numpy as np
def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); data = f.read()
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], "<f4")
            for k, v in h.items() if k != "__metadata__"}
a, b = read(sys.argv[1]), read(sys.argv[2])
x = np.concatenate([a[k] for k in sorted(a)]).astype(np.float64)
y = np.concatenate([b[k] for k in sorted(a)]).astype(np.float64)
worst = np.max(np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-3))
print("%.2g/%.2g" % (worst, np.linalg.norm(x - y) / np.linalg.norm(x)))
PYEOF
d() { $PY "$T/diff.py" "$T/$1.st" "$T/$2.st"; }
echo "job seed steps | bf16 single-dp single-ddp2 single-ddp4 | bf16-vs-fp32 (single) | emu-vs-cpu bf16 (single, ddp2)   [worst/L2]"
while IFS='|' read -r name args; do
    for seed in $seeds; do
        for steps in 12 50; do
            run() { n=$1; shift; "$bin" --backend cpu --quiet $args --seed "$seed" --steps "$steps" "$@" --save "$T/$n.st" >/dev/null; }
            run s --mode single --precision bf16
            run f --mode single --precision fp32
            run dp --mode dp --gpus 0,1 --precision bf16
            run d2 --mode ddp --gpus 0,1 --precision bf16
            run d4 --mode ddp --gpus 0,1,2,3 --precision bf16
            e="-"
            if [ -x "$emu" ]; then
                EMU_NGPU=2 "$emu" --backend cuda --quiet $args --seed "$seed" --steps "$steps" --mode single --gpus 0 \
                    --precision bf16 --save "$T/es.st" >/dev/null
                EMU_NGPU=2 "$emu" --backend cuda --quiet $args --seed "$seed" --steps "$steps" --mode ddp --gpus 0,1 \
                    --comm nccl --precision bf16 --save "$T/ed.st" >/dev/null
                e="$(d s es) $(d s ed)"
            fi
            echo "$name $seed $steps | $(d s dp) $(d s d2) $(d s d4) | $(d s f) | $e"
        done
    done
done <<'JOBS'
mlp-small-adam|--model mlp-small --batch 256
mlp-small-sgd|--model mlp-small --batch 256 --optim sgd --lr 0.05 --momentum 0.9
tanh-mse-sgd|--layers 16,64,64,4 --act tanh --loss mse --optim sgd --lr 0.05 --momentum 0.9 --samples 1024 --batch 64
JOBS
