#!/bin/sh
# tests/e2e/e2e_cli.sh: the binary as a user meets it: --help/--version, single
# mode on synthetic, CSV and .npy data, and for every bad option or data file
# exactly one stderr line "ddpbench: error: ..." naming it, with exit 2.
# Usage: sh tests/e2e/e2e_cli.sh ./ddpbench
E2E=e2e_cli
. "$(dirname "$0")/lib.sh"

# float32 bytes: 0.0, 0.5, 7.0, 1.0
f0='\000\000\000\000'; fhalf='\000\000\000\077'; f7='\000\000\340\100'; f1='\000\000\200\077'
rep() { i=0; while [ $i -lt "$1" ]; do printf "$2"; i=$((i + 1)); done; }

rep 40 "$f1" >"$T/x4x10.bin"           # 4 rows x 10 features of 1.0
mknpy "$T/x.npy" '<f4' '(4, 10)' False "$T/x4x10.bin"
rep 4 "$f0" >"$T/y0.bin"
mknpy "$T/y.npy" '<f4' '(4,)' False "$T/y0.bin"
{ rep 3 "$f0"; printf "$fhalf"; } >"$T/yhalf.bin"
mknpy "$T/yhalf.npy" '<f4' '(4,)' False "$T/yhalf.bin"
{ rep 3 "$f0"; printf "$f7"; } >"$T/y7.bin"
mknpy "$T/y7.npy" '<f4' '(4,)' False "$T/y7.bin"
mknpy "$T/fortran.npy" '<f4' '(4, 10)' True "$T/x4x10.bin"
mknpy "$T/complex.npy" '<c8' '(4, 10)' False "$T/x4x10.bin"
mknpy "$T/bigend.npy" '>f4' '(4, 10)' False "$T/x4x10.bin"
head -c 100 "$T/x4x10.bin" >"$T/short.bin"
mknpy "$T/truncated.npy" '<f4' '(4, 10)' False "$T/short.bin"
printf 'PK\003\004 this is a zip, not npy' >"$T/magic.npy"
: >"$T/empty.npy"

# ---- the happy paths -----------------------------------------------------------
"$BIN" --help >"$T/help" 2>&1 && grep -q -- "--mode" "$T/help" && ok || ko "--help"
"$BIN" --version | grep -q "^ddpbench [0-9]" && ok || ko "--version"
"$BIN" --mode single --model seed-linear --backend cpu --quiet >"$T/out" 2>&1 &&
    grep -q "throughput" "$T/out" && grep -q "checksum" "$T/out" && ok || ko "seed-linear: $(cat "$T/out")"
"$BIN" --mode single --model seed-logreg --backend cpu >"$T/out" 2>&1 &&
    grep -q "epoch 10" "$T/out" && ok || ko "seed-logreg logs every epoch: $(cat "$T/out")"
"$BIN" --mode single --model seed-logreg --backend cpu --quiet >"$T/out" 2>&1 &&
    ! grep -q "epoch" "$T/out" && ok || ko "--quiet silences the loss lines"
"$BIN" --mode compare --model seed-logreg --backend cpu --gpus 0,1 >"$T/out" 2>&1 &&
    ! grep -q "epoch" "$T/out" && grep -q "final loss" "$T/out" && ok ||
    ko "compare leaves out the runs' loss lines (its table has the final loss): $(cat "$T/out")"
"$BIN" --mode compare --model seed-logreg --backend cpu --gpus 0,1 --log-every 5 >"$T/out" 2>&1 &&
    [ "$(grep -c "epoch .*loss" "$T/out")" -ge 3 ] && ok || ko "compare --log-every keeps them: $(cat "$T/out")"
"$BIN" --mode single --layers 10,1 --loss bce --data "$T/x.npy" --targets "$T/y.npy" --batch 2 --backend cpu \
    --quiet >"$T/out" 2>&1 && ok || ko ".npy training: $(cat "$T/out")"
printf 'a,b,c,label\n1,2,3,0\n4,5,6,1\n7,8,9,2\n0,1,0,1\n' >"$T/good.csv"
"$BIN" --mode single --layers 3,8,3 --loss ce --data "$T/good.csv" --batch 2 --backend cpu --quiet \
    >"$T/out" 2>&1 && ok || ko "CSV training: $(cat "$T/out")"

# ---- bad options ----------------------------------------------------------------
expect_error "--batch" --batch 0
expect_error "--batch" --batch -5
expect_error "--lr" --lr abc
expect_error "--mode" --mode fastest
expect_error "--gpus" --gpus ""
expect_error "--gpus" --mode dp --backend cpu --gpus 1,1
expect_error "--model" --model bert
expect_error "unknown option" --frobnicate
# "--" ends the options (getopt): what follows is a stray argument, said as one, not as a
# non-option ("options start with --" of an argument that does)
w="ddpbench takes no positional arguments"
expect_error "unexpected argument '--mode' after '--' ($w: '--' ends the options)" -- --mode single
expect_error "unexpected argument 'x' after '--'" --mode single -- x
expect_error "unexpected argument 'stray' ($w; options start with --)" stray
expect_error "--scenario: empty name" --scenario ""
# a list past its buffer is refused, not cut into another list
expect_error "--coll: 'all-reduce,all-reduce,all-reduce...' is too long" --mode comm \
    --coll "$(printf 'all-reduce,%.0s' $(seq 25))reduce"
expect_error "--nesterov" --optim sgd --nesterov
expect_error "--backend cuda" --backend cuda --mode single
# --cuda-graph on where no step can be a graph: each refusal its own reason.
# Those of the options alone come before the GPU probe (--backend cuda on a
# machine without a GPU still hears them, not "no GPU").
expect_error "--cuda-graph on: the CPU backend computes as it is called" --backend cpu --mode single --cuda-graph on
expect_error "--cuda-graph on: --accum: a step of several micro-batches" --backend cuda --mode single --accum 2 \
    --cuda-graph on
expect_error "--cuda-graph on: ddp over --comm shm: the host sums the gradients" --backend cuda --mode ddp \
    --comm shm --gpus 0,1 --cuda-graph on
expect_error "--cuda-graph on: --zero: the shards' gathers and reduce-scatters" --backend cuda --mode ddp --zero 2 \
    --gpus 0,1 --cuda-graph on
# dp is captured (one graph of every device, over NCCL too under on): its
# --cuda-graph on passes the options' check and meets the GPU probe
expect_error "--backend cuda" --backend cuda --mode dp --gpus 0,1 --cuda-graph on
expect_error "--backend cuda" --backend cuda --mode compare --gpus 0,1 --cuda-graph on
expect_error "--cuda-graph on: --mode comm has no training step" --backend cuda --mode comm --gpus 0,1 --cuda-graph on
expect_error "--cuda-graph" --cuda-graph sometimes

# ---- bad data files ---------------------------------------------------------------
expect_error "missing.npy" --layers 10,1 --loss bce --data "$T/missing.npy" --targets "$T/y.npy" --backend cpu
expect_error "magic.npy" --layers 10,1 --loss bce --data "$T/magic.npy" --targets "$T/y.npy" --backend cpu
expect_error "empty.npy" --layers 10,1 --loss bce --data "$T/empty.npy" --targets "$T/y.npy" --backend cpu
expect_error "truncated" --layers 10,1 --loss bce --data "$T/truncated.npy" --targets "$T/y.npy" --backend cpu
expect_error "Fortran" --layers 10,1 --loss bce --data "$T/fortran.npy" --targets "$T/y.npy" --backend cpu
expect_error "c8" --layers 10,1 --loss bce --data "$T/complex.npy" --targets "$T/y.npy" --backend cpu
expect_error "bigend.npy" --layers 10,1 --loss bce --data "$T/bigend.npy" --targets "$T/y.npy" --backend cpu
expect_error "10 feature columns" --layers 12,1 --loss bce --data "$T/x.npy" --targets "$T/y.npy" --backend cpu
expect_error "is 0.5, not an integer class id" --layers 10,3 --loss ce --data "$T/x.npy" --targets "$T/yhalf.npy" --backend cpu
expect_error "not a class id" --layers 10,3 --loss ce --data "$T/x.npy" --targets "$T/y7.npy" --backend cpu
expect_error "outside [0, 1]" --layers 10,1 --loss bce --data "$T/x.npy" --targets "$T/y7.npy" --backend cpu
printf '1,2,3\n4,5\n' >"$T/fields.csv"
expect_error "fields.csv" --layers 2,1 --loss mse --data "$T/fields.csv" --backend cpu
printf '1,2,3\n4,five,6\n' >"$T/word.csv"
expect_error "word.csv" --layers 2,1 --loss mse --data "$T/word.csv" --backend cpu
: >"$T/empty.csv"
expect_error "empty.csv" --layers 2,1 --loss mse --data "$T/empty.csv" --backend cpu
expect_error "nothere.csv" --layers 2,1 --loss mse --data "$T/nothere.csv" --backend cpu

e2e_finish
