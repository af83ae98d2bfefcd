#!/bin/sh
# tests/e2e/e2e_predict_busy.sh: --predict says the same beside two busy
# loops, run after run: bench/predict_stability.sh's three runs of
# --mode single --predict give DP and DDP in the same order at every device
# count, each step within 15% of the others (measured: 4-6% at load 7-8;
# main's build before the collectives' quickest ops spread 49-99% there).
# Usage: sh tests/e2e/e2e_predict_busy.sh ./ddpbench
E2E=e2e_predict_busy
. "$(dirname "$0")/lib.sh"
if RUNS=3 LOOPS=2 sh "$(dirname "$0")/../../bench/predict_stability.sh" "$BIN" >"$T/out" 2>&1; then
    ok
    echo "$E2E: $(grep -E '^load|^8 ' "$T/out" | tr '\n' ' ')"
else
    ko "$(cat "$T/out")"
fi
e2e_finish
