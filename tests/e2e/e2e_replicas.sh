#!/bin/sh
# tests/e2e/e2e_replicas.sh: --check-replicas N.  Unchanged runs never trip
# it (dp, ddp, ZeRO-1 and -2, the hooks, uneven data with join, bf16,
# compare, mpirun's ranks); a planted one-ulp change of one rank's parameter after step S
# (DDPBENCH_FAULT=ulp:R:S) stops the run at the first checked step at or
# after S, exit 1, naming the step, the rank and the layer, and only then
# (a check between, a run without it, the same bits as without the check);
# under ZeRO-1 and -2 the next step's all-gather gives every rank the owners'
# parameters again, and a dp replica is replicated anew every step, so there
# a change is caught at the step it happens; ZeRO-3 and single are refused.
# Usage: sh tests/e2e/e2e_replicas.sh ./ddpbench
E2E=e2e_replicas
. "$(dirname "$0")/lib.sh"

# small updates (Adam's are about --lr): a one-ulp difference of the planted
# weight (its layer's largest) lasts; a larger step can round both copies alike
R="--backend cpu --layers 16,64,64,4 --loss mse --samples 600 --batch 60 --steps 12 --lr 1e-4 --quiet --json"

# run EXIT WORDS [options]: exit status, and WORDS on stderr (exit 1)
run() {
    want=$1 words=$2
    shift 2
    DDPBENCH_E2E_TAG=$TAG "$BIN" $R "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -ne "$want" ]; then
        ko "$*: exit $rc, expected $want: $(tail -2 "$T/err")"
    elif [ "$want" -ne 0 ] && ! grep -qF -- "$words" "$T/err"; then
        ko "$*: no '$words' in: $(cat "$T/err")"
    else
        ok
    fi
}
bits() { sed -n 's/.*"bits":"\([0-9a-f]*\)".*/\1/p' "$T/out" | head -1; }

# ---- unchanged runs never trip it, and it changes no bit --------------------------
for a in "--mode dp --gpus 0,1,2" "--mode ddp --gpus 0,1,2" "--mode ddp --gpus 0,1,2 --zero 1" \
    "--mode ddp --gpus 0,1,2 --zero 2" "--mode ddp --gpus 0,1 --comm-hook fp16" \
    "--mode ddp --gpus 0,1 --comm-hook powersgd:2:3" "--mode ddp --gpus 0,1 --precision bf16" \
    "--mode dp --gpus 0,1 --precision bf16" "--mode ddp --gpus 0,1,2 --accum 3" \
    "--mode dp --gpus 0,1,2 --batch 5 --accum 2" \
    "--mode ddp --gpus 0,1,2 --rank-samples 240,160,80 --join --steps 20"; do
    # shellcheck disable=SC2086 # the options are meant to split
    run 0 "" $a
    b0=$(bits)
    # shellcheck disable=SC2086
    run 0 "" $a --check-replicas 1
    [ -n "$b0" ] && [ "$b0" = "$(bits)" ] && ok || ko "$a: --check-replicas changed the bits"
done
run 0 "" --mode compare --gpus 0,1 --check-replicas 2

# ---- a planted drift: caught at the first checked step at or after it -----------
DDPBENCH_FAULT=ulp:1:5 run 1 "the replicas differ after step 8 (--check-replicas 4): rank 1's layer 2 weight is up to" \
    --mode ddp --gpus 0,1,2 --check-replicas 4
grep -q "ranks that differ from rank 0: 1$" "$T/err" && ok || ko "the ranks that differ: $(cat "$T/err")"
DDPBENCH_FAULT=ulp:2:2 run 1 "the replicas differ after step 3 (--check-replicas 3): rank 2's layer 2 weight" \
    --mode ddp --gpus 0,1,2 --check-replicas 3
DDPBENCH_FAULT=ulp:1:6 run 1 "the replicas differ after step 7 (--check-replicas 1): rank 1's layer 2" \
    --mode ddp --gpus 0,1 --check-replicas 1 --comm-hook fp16
DDPBENCH_FAULT=ulp:2:5 run 1 "the replicas differ after step 6 (--check-replicas 2): rank 2's layer 2" \
    --mode ddp --gpus 0,1,2 --check-replicas 2 --rank-samples 240,160,80 --join --steps 20
DDPBENCH_FAULT=ulp:1:5 run 1 "the replicas differ after step 6 (--check-replicas 3): rank 1's layer 2" \
    --mode ddp --gpus 0,1 --check-replicas 3 --precision bf16
for z in 1 2; do # the step it happens, at a check: the next all-gather would mend it
    DDPBENCH_FAULT=ulp:1:5 run 1 "the replicas differ after step 6 (--check-replicas 2): rank 1's layer 2" \
        --mode ddp --gpus 0,1,2 --check-replicas 2 --zero $z
done
DDPBENCH_FAULT=ulp:1:5 run 1 "the replicas differ after step 6 (--check-replicas 3): device 1's layer 2 weight is up to" \
    --mode dp --gpus 0,1,2 --check-replicas 3
# a dp replica changed between checks is replicated anew: nothing to catch,
# nothing changed; device 0's parameters are the model itself
DDPBENCH_FAULT=ulp:1:4 run 0 "" --mode dp --gpus 0,1,2 --check-replicas 3
DDPBENCH_FAULT=ulp:0:5 run 0 "" --mode dp --gpus 0,1,2 --check-replicas 3
# over MPI's collectives, ranks started by mpirun: the same catch, the same silence
if need mpirun; then
    M="mpirun --allow-run-as-root --oversubscribe -q -x DDPBENCH_E2E_TAG -x DDPBENCH_FAULT -n 2"
    # shellcheck disable=SC2086
    DDPBENCH_FAULT= DDPBENCH_E2E_TAG=$TAG timeout 120 $M "$BIN" $R --mode ddp --gpus 0,1 \
        --check-replicas 2 >"$T/out" 2>"$T/err" && ok || ko "mpirun: $(tail -2 "$T/err")"
    # shellcheck disable=SC2086
    DDPBENCH_FAULT=ulp:1:5 DDPBENCH_E2E_TAG=$TAG timeout 120 $M "$BIN" $R --mode ddp --gpus 0,1 \
        --check-replicas 2 >"$T/out" 2>"$T/err"
    grep -q "the replicas differ after step 6 (--check-replicas 2): rank 1's layer 2 weight" "$T/err" &&
        ok || ko "mpirun: the planted drift was not caught: $(tail -2 "$T/err")"
fi
[ -z "$(lingering)" ] && ok || ko "processes left behind"

# ---- what it refuses --------------------------------------------------------------
expect_error "--check-replicas: not with --zero 3" --backend cpu --mode ddp --zero 3 --check-replicas 2
expect_error "--check-replicas: --mode single holds one copy" --backend cpu --mode single --check-replicas 2
expect_error "--check-replicas: not with --zero 3" --backend cpu --mode compare --zero 1,3 --check-replicas 2
expect_error "--check-replicas: -1 is too small" --check-replicas -1

e2e_finish
