#!/bin/sh
# tests/e2e/e2e_predict_busy.sh: --predict says the same beside two busy
# loops, run after run: bench/predict_stability.sh's three runs of
# --mode single --predict give DP and DDP in the same order at every device
# count (FLIPS in the table otherwise: main's build before the collectives'
# quickest ops put DDP ahead, then DP ahead, in runs a minute apart).  How
# far the steps spread is printed, not asserted: issue 43's 15% is
# bench/predict_stability.sh's goal, and beside four busy loops one slow
# bench spread even the 2-device step 17% (single's own step 9%).
# Then one more run beside two busy loops, in text with its page: the model's
# header says how far apart its collectives' benches were and, when single's
# descheduled time is over 5% of its step, that it is left out; the model's
# line names the busy machine among what it leaves out; the page's model
# section says how much of the measured step was the machine's (main's build
# says none of these).
# Usage: sh tests/e2e/e2e_predict_busy.sh ./ddpbench
E2E=e2e_predict_busy
. "$(dirname "$0")/lib.sh"
RUNS=3 LOOPS=2 sh "$(dirname "$0")/../../bench/predict_stability.sh" "$BIN" >"$T/out" 2>&1
if grep -q '^8 ' "$T/out" && ! grep -q FLIPS "$T/out"; then
    ok
    echo "$E2E: $(grep -E '^load|^2 |^8 ' "$T/out" | tr '\n' ' ')"
else
    ko "$(cat "$T/out")"
fi
LOOPS=
e2e_on_exit() { for p in $LOOPS; do kill "$p" 2>/dev/null; done; }
sh -c 'while :; do :; done' &
LOOPS=$!
sh -c 'while :; do :; done' &
LOOPS="$LOOPS $!"
"$BIN" --mode single --backend cpu --predict --report "$T/page.html" --quiet >"$T/text" 2>&1 ||
    ko "--predict beside two busy loops failed: $(tail -2 "$T/text")"
for p in $LOOPS; do kill "$p" 2>/dev/null; done
LOOPS=
head=$(grep '^predict: ' "$T/text")
desched=$(awk '$1 == "descheduled" { print $2 }' "$T/text")
step=$(awk '$1 == "sum" && $2 == "of" { print $4 }' "$T/text")
echo "$head" | grep -Eq "each op's quickest over [0-9]+ benches, [0-9]+% apart" && ok ||
    ko "the model's header does not say how far apart its benches were: $head"
grep -q 'no shared cores, no barrier wake-ups, no busy machine' "$T/text" && ok ||
    ko "the model's line does not say it leaves the busy machine out: $(grep 'ring all-reduce' "$T/text")"
if awk -v d="${desched:-0}" -v s="${step:-1}" 'BEGIN { exit !(d > 0.05 * s) }'; then
    echo "$head" | grep -q "; its $desched ms descheduled left out)" && ok ||
        ko "single was descheduled $desched ms of $step, which the header does not leave out: $head"
    grep -q "Busy machine: single's measured step holds $desched ms of the machine's time" "$T/page.html" && ok ||
        ko "the page's model section does not say the step's $desched ms were the machine's"
else
    echo "$head" | grep -q "descheduled left out" &&
        ko "the header leaves out $desched ms of a $step ms step (5% or less): $head" || ok
fi
e2e_finish
