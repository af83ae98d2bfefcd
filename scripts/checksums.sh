#!/bin/sh
# scripts/checksums.sh: the bits of the final parameters for a fixed matrix of
# runs (every mode, loss, optimizer, accumulation, uneven DP chunks, buckets),
# one line each.  A change that should not touch the arithmetic (a move, a
# refactor) prints the same lines before and after:
#   scripts/checksums.sh > before.txt; ...; scripts/checksums.sh | diff before.txt -
# The extra options go to every run: `scripts/checksums.sh ./ddpbench
# --precision bf16` prints the bf16 row of the matrix (the same labels, the
# bits of the CPU's bf16 reference arithmetic); without them, fp32.
# Usage: scripts/checksums.sh [./ddpbench] [extra options...]
set -eu
bin=${1:-./ddpbench}
[ $# -gt 0 ] && shift
extra="$*"
run() { # label, options...
    label=$1
    shift
    # stdout is the CSV alone; stderr (notes, errors) is kept apart
    err=$(mktemp)
    # shellcheck disable=SC2086 # the extra options are meant to split
    out=$("$bin" --backend cpu --quiet --csv "$@" $extra 2>"$err") || {
        echo "$label: FAILED: $(tail -1 "$err")"
        rm -f "$err"
        return
    }
    rm -f "$err"
    # mode, final_loss, checksum_bits
    echo "$label: $(echo "$out" | sed -n 2p | awk -F, '{print $1, $18, $22}')"
}
for mode in single dp ddp; do
    g=0,1
    [ $mode = single ] && g=0
    run "$mode mlp-small" --mode $mode --gpus $g --steps 12
    run "$mode mse/sgd-momentum" --mode $mode --gpus $g --layers 16,32,4 --loss mse --optim sgd \
        --momentum 0.9 --nesterov --samples 300 --batch 24 --steps 20
    run "$mode bce/adamw accum" --mode $mode --gpus $g --layers 12,20,1 --loss bce --optim adamw \
        --act tanh --samples 200 --batch 16 --accum 2 --steps 15
    run "$mode ce/adam sigmoid" --mode $mode --gpus $g --layers 8,16,16,3 --loss ce --optim adam \
        --act sigmoid --samples 150 --batch 30 --epochs 2
    run "$mode seed-linear" --mode $mode --gpus $g --model seed-linear
    run "$mode seed-logreg" --mode $mode --gpus $g --model seed-logreg
done
run "dp 3 uneven" --mode dp --gpus 0,1,2 --layers 10,24,2 --loss ce --samples 130 --batch 25 --steps 12
run "ddp 3 tiny buckets" --mode ddp --gpus 0,1,2 --layers 10,24,24,2 --loss ce --samples 130 \
    --batch 24 --steps 12 --bucket-mb 0.001 --first-bucket-mb 0.001
run "ddp no-overlap accum" --mode ddp --gpus 0,1 --layers 10,24,3 --loss mse --samples 130 \
    --batch 24 --accum 2 --steps 10 --no-overlap
# What the strategies' optional paths compute: ZeRO's stages, the hooks,
# uneven shards under join, and 16 bits.
for z in 1 2 3; do
    run "ddp zero $z adam accum" --mode ddp --gpus 0,1,2 --layers 10,24,24,3 --loss ce --optim adam \
        --samples 130 --batch 24 --accum 2 --steps 10 --zero $z --bucket-mb 0.001 --first-bucket-mb 0.001
done
run "ddp hook fp16" --mode ddp --gpus 0,1 --layers 10,24,3 --loss ce --samples 130 --batch 24 \
    --steps 10 --comm-hook fp16
run "ddp hook powersgd" --mode ddp --gpus 0,1 --layers 10,24,24,3 --loss ce --samples 130 \
    --batch 24 --steps 10 --comm-hook powersgd:2:3
run "ddp join uneven" --mode ddp --gpus 0,1,2 --layers 10,24,3 --loss ce --samples 100 --batch 24 \
    --epochs 2 --rank-samples 40,30,30
for mode in single dp ddp; do
    g=0,1
    [ $mode = single ] && g=0
    run "$mode bf16" --mode $mode --gpus $g --layers 16,32,4 --loss ce --samples 200 --batch 24 \
        --steps 10 --precision bf16
done
