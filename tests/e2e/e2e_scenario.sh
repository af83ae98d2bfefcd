#!/bin/sh
# tests/e2e/e2e_scenario.sh: --scenario, each failure reproduced and explained.
# The silent divergences (set-epoch ... bucket-view) also without their planted
# mistake (DDPBENCH_SCENARIO_UNPLANT), where their verdict must say NOT.
# Every scenario must run, print what PyTorch users see, what ddpbench
# measured and the fix, and exit 0 saying it behaved as described; and each
# must exit 1 saying it did NOT when what it describes cannot happen (no
# slow rank, even shards, one rank, one device).  --slow-rank and the
# configuration check on their own: a straggler changes no result, and bad
# values are input errors.  Usage: sh tests/e2e/e2e_scenario.sh ./ddpbench
E2E=e2e_scenario
. "$(dirname "$0")/lib.sh"
e2e_on_exit() { for p in $(leftovers); do kill -KILL "$p" 2>/dev/null; done; }

# scenario NAME EXIT WORDS [options]: exit status and a line holding WORDS
scenario() {
    name=$1 want=$2 words=$3
    shift 3
    t0=$(date +%s)
    # A timing verdict (straggler's waits) is measured on a shared machine: a
    # run the load upset is tried again, up to TRIES times in all (its
    # conclusion is a mean over 40 steps, and one descheduled step of a
    # loaded 2-core box moves it); a scenario that cannot show what it says
    # fails every try.  With BUSY_OK, a verdict the machine's time decided on
    # every try ("no verdict: a busy machine", exit 4: beside two busy loops
    # it is every try) passes as what it is.
    try=1
    while :; do
        DDPBENCH_E2E_TAG=$TAG "$BIN" --scenario "$name" "$@" >"$T/out" 2>&1
        rc=$?
        [ $rc -ne "$want" ] && [ "$try" -lt "${TRIES:-1}" ] || break
        echo "e2e_scenario: $name $*: exit $rc on try $try (load $(cut -d' ' -f1 /proc/loadavg)): $(tail -1 "$T/out"); again"
        try=$((try + 1))
    done
    # a timing verdict the machine decided on every try: no verdict (exit 4),
    # said as such, with the time a rank was off its core shown
    if [ $rc -eq 4 ] && [ -n "${BUSY_OK:-}" ] && grep -q "no verdict: a busy machine" "$T/out" &&
        grep -q "descheduled (another process had the core)" "$T/out"; then
        ok
        echo "e2e_scenario: $name $*: no verdict on $try tries, a busy machine (load $(cut -d' ' -f1 /proc/loadavg)): $(tail -1 "$T/out")"
        return
    fi
    [ $rc -eq "$want" ] || { ko "--scenario $name $*: exit $rc, expected $want: $(tail -5 "$T/out")"; return; }
    # the paragraphs are wrapped: look in the text with its line breaks undone
    tr '\n' ' ' <"$T/out" | tr -s ' ' >"$T/flat"
    grep -qF -- "$words" "$T/flat" || { ko "--scenario $name $*: no '$words' in: $(cat "$T/out")"; return; }
    if [ "$want" -eq 0 ]; then
        for part in "What PyTorch users see:" "What ddpbench measured" "The fix:"; do
            grep -qF "$part" "$T/out" || ko "--scenario $name: no '$part'"
        done
    fi
    [ -z "$(lingering)" ] || ko "--scenario $name $*: processes left behind"
    ok
    echo "e2e_scenario: $name $*: exit $rc in $(($(date +%s) - t0)) s: $(tail -1 "$T/out")"
}

"$BIN" --scenario list >"$T/out" 2>&1 && [ "$(wc -l <"$T/out")" -eq 10 ] &&
    for n in uneven straggler dp-device0 mismatch set-epoch loss-scale no-sync unused \
        collective-at-runtime bucket-view; do grep -q "^$n " "$T/out" || exit 1; done &&
    ok || ko "--scenario list: $(cat "$T/out")"
expect_error "--scenario: unknown scenario 'nope'" --scenario nope
# What a scenario would ignore is refused: an output it never writes, another mode.
expect_error "--scenario dp-device0: not with --save" --scenario dp-device0 --save "$T/s.st"
expect_error "not with --json" --scenario uneven --json
expect_error "not with --trace" --scenario straggler --trace "$T/t.json"
expect_error "--scenario straggler: --mode compare: this scenario runs ddp" --scenario straggler \
    --mode compare
[ -e "$T/s.st" ] || [ -e "$T/t.json" ] && ko "a refused scenario wrote a file" || ok

scenario uneven 0 "rank 2 ran out of data after step 2"
scenario uneven 1 "NOT as described" --rank-samples 15,15,15
TRIES=3 BUSY_OK=1 scenario straggler 0 "the ranks that wait are the fast ones"
scenario straggler 1 "NOT as described: no rank was slowed" --slow-rank 1:1
scenario dp-device0 0 "optimizer state"
# its fix in its own numbers: ZeRO-1's ranks hold less than DP's device 0,
# DDP's about as much (the fix said "no device 0 to run out of memory" beside
# DP device 0 6.2 MiB and DDP rank 0 6.1 MiB)
grep -qE "each rank holds what DP's device 0 held \(at most [0-9.]+ [KM]iB against [0-9.]+ [KM]iB here.*at most [0-9.]+ [KM]iB on a rank, [0-9.]*[1-9][0-9.]* [KM]iB less than DP's device 0" "$T/flat" && ok ||
    ko "dp-device0: its fix without its numbers: $(grep -A5 'The fix' "$T/out")"
scenario dp-device0 1 "NOT as described" --gpus 0
scenario mismatch 0 "was started with another model (--layers, --act) than rank 0"
grep -qF "was started with another optimizer or hyper-parameters" "$T/flat" && ok ||
    ko "mismatch: another --lr was not named: $(cat "$T/out")"
scenario mismatch 1 "NOT as described" --gpus 0
# one rank is not started with a change: it would be the run's reference
# itself, training a wider model than the shared segment was laid out for
# (its parameters overran it: SIGSEGV one run in twenty)
grep -qF "none was started with a change" "$T/out" && ! grep -q "NOT caught" "$T/out" && ok ||
    ko "mismatch --gpus 0 started its one rank with a change: $(cat "$T/out")"

# The silent divergences: each as described, and each NOT once its planted
# mistake is left out (DDPBENCH_SCENARIO_UNPLANT: the verdict can fail),
# or where it cannot happen (one rank).
scenario set-epoch 0 "without set_epoch rank 0 24 of 24 (100%), rank 1 24 of 24 (100%); with it rank 0 0 of 24 (0%)"
scenario set-epoch 1 "NOT as described: with set_epoch the batches repeated" --no-shuffle
scenario loss-scale 0 "8.000000 times single's (world x accumulation = 8"
scenario loss-scale 0 "2.000000 times single's (world x accumulation = 2" --gpus 0,1 --accum 1
scenario loss-scale 1 "NOT as described: one rank and one micro-batch" --gpus 0 --accum 1
scenario no-sync 0 "the replicas differ after step 4 (--check-replicas 1): rank 1's layer"
scenario no-sync 1 "NOT as described: the replicas never differed" --gpus 0
scenario unused 0 "rank 1 (device 1): step 4: backward gave layer 1 weight, layer 1 bias no gradient"
scenario unused 1 "NOT as described: there is no rank 1" --gpus 0
scenario collective-at-runtime 0 "mismatched collectives: rank"
grep -qF "rank 1: #8 all-reduce of the loss this rank logs (1 floats)" "$T/flat" && ok ||
    ko "collective-at-runtime: the extra collective not named: $(cat "$T/out")"
scenario collective-at-runtime 1 "NOT as described: there is no rank 1" --gpus 0
scenario bucket-view 0 "views saved per device: rank 0 1.1 MiB (comm buffers 1.1 MiB); rank 1 1.1 MiB"
for name in set-epoch loss-scale no-sync unused collective-at-runtime bucket-view; do
    DDPBENCH_SCENARIO_UNPLANT=1 scenario $name 1 "NOT as described"
done
expect_error "--report: this scenario's runs do not finish" --scenario unused --report "$T/u.html"

# A signal during a scenario stops it as it stops any run: no next run, one
# line "ddpbench: stopped: ...", 128 + the signal; a rank killed during one
# is named with its signal (exit 1).  The signal goes once the scenario's
# first ranks exist (uneven's first run waits --timeout 2 s on the rank that
# left; straggler's runs take seconds): it lands in a run or between two,
# and either way no verdict may follow.  (env --default-signal: a background
# job of a script starts with SIGINT ignored, a test run under nohup with
# SIGHUP ignored, and ddpbench rightly keeps an ignored signal ignored.)
# signalled NAME SIG|rank WANT WORDS [options]
signalled() {
    name=$1 sig=$2 want=$3 words=$4
    shift 4
    DDPBENCH_E2E_TAG=$TAG env --default-signal=INT,HUP "$BIN" --scenario "$name" "$@" >"$T/out" 2>"$T/err" &
    sup=$!
    i=0
    while [ -z "$(pgrep -P $sup)" ] && [ $i -lt 400 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    if [ "$sig" = rank ]; then
        kill -KILL "$(pgrep -P $sup | head -1)"
    else
        kill -"$sig" $sup
    fi
    wait $sup
    rc=$?
    [ $rc -eq "$want" ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "^$words" "$T/err" && ok ||
        ko "--scenario $name, $sig: exit $rc, expected $want and '$words': $(cat "$T/err")"
    grep -q "What PyTorch users see\|as described\|a run failed" "$T/out" &&
        ko "--scenario $name, $sig: it went on: $(cat "$T/out")" || ok
    [ -z "$(lingering)" ] || ko "--scenario $name, $sig: processes left behind"
}
need pgrep && {
    signalled uneven TERM 143 "ddpbench: stopped: --scenario uneven: interrupted by SIGTERM"
    signalled straggler INT 130 "ddpbench: stopped: --scenario straggler: interrupted by SIGINT"
    signalled dp-device0 HUP 129 "ddpbench: stopped: --scenario dp-device0: interrupted by SIGHUP" --steps 200
    signalled uneven rank 1 "ddpbench: error: --scenario uneven: rank [0-9] (device [0-9]) killed by signal 9"
}

# --slow-rank is a real delay with the same result: the same bits, a longer step.
A="--backend cpu --mode ddp --gpus 0,1 --model mlp-small --steps 16 --quiet --json"
"$BIN" $A >"$T/a.json" 2>/dev/null && "$BIN" $A --slow-rank 1:4 >"$T/b.json" 2>/dev/null || ko "--slow-rank runs failed"
ba=$(sed -n 's/.*"bits":"\([0-9a-f]*\)".*/\1/p' "$T/a.json")
bb=$(sed -n 's/.*"bits":"\([0-9a-f]*\)".*/\1/p' "$T/b.json")
[ -n "$ba" ] && [ "$ba" = "$bb" ] && ok || ko "--slow-rank changed the result: $ba vs $bb"
grep -q '"slow_rank":{"rank":1,"factor":4}' "$T/b.json" && ok || ko "--json lacks config.slow_rank"
expect_error "--slow-rank: rank 2, but there are 2 ranks" --backend cpu --mode ddp --gpus 0,1 --slow-rank 2:3
expect_error "--slow-rank: only ddp has ranks" --backend cpu --mode dp --gpus 0,1 --slow-rank 1:3
expect_error "--slow-rank: '1' is not RANK:FACTOR" --backend cpu --mode ddp --slow-rank 1
expect_error "--slow-rank: 0 is too small" --backend cpu --mode ddp --slow-rank 1:0
expect_error "--slow-rank: 0.5 is too small (at least 1)" --backend cpu --mode ddp --slow-rank 1:0.5
expect_error "--slow-rank: 'x' is not a number" --backend cpu --mode ddp --slow-rank 1:x
# a fractional factor: the same bits, and the extra work in proportion.  One
# rank alone (no waits), timed on its CPU clock (the machine's load moves
# wall time 3x here, not CPU time): 1.5 adds half of what 2 adds.  Judged
# on the step's CPU work (work_cpu_s p10, the gate's figure), not the
# process's CPU time: that carries the set-up's too, which a busy machine
# moves by 0.1-0.2 s of the 0.8 s: at load 6 its share went 0.43-0.68 in
# 18 tries and once out of 0.3-0.75 in 3 runs of this suite; the step's
# work's share went 0.47-0.57 in 10.
"$BIN" $A --slow-rank 1:1.5 >"$T/c.json" 2>/dev/null || ko "--slow-rank 1:1.5 failed"
bc=$(sed -n 's/.*"bits":"\([0-9a-f]*\)".*/\1/p' "$T/c.json")
[ -n "$bc" ] && [ "$ba" = "$bc" ] && ok || ko "--slow-rank 1:1.5 changed the result: $ba vs $bc"
grep -q '"slow_rank":{"rank":1,"factor":1.5}' "$T/c.json" && ok || ko "--json lacks the factor 1.5"
O="--backend cpu --mode ddp --gpus 0 --model mlp-small --steps 150 --quiet --json"
for f in 1 1.5 2; do
    "$BIN" $O --slow-rank 0:$f >"$T/f$f.json" 2>/dev/null || ko "--slow-rank 0:$f failed"
done
python3 - "$T/f1.json" "$T/f1.5.json" "$T/f2.json" >"$T/share" 2>&1 <<'EOF' && ok || ko "--slow-rank 0:1.5 not half of 0:2's extra work: $(tail -1 "$T/share")"
import json, sys
o = [json.load(open(p)) for p in sys.argv[1:]]
c = [x["work_cpu_s"]["p10"] for x in o]
assert len({x["checksum"]["bits"] for x in o}) == 1, "bits differ"
share = (c[1] - c[0]) / (c[2] - c[0])
assert c[1] > c[0] and 0.3 <= share <= 0.75, "the step's CPU work %s, 1.5's share %.3f" % (c, share)
EOF
expect_error "--zero: only ddp shards" --backend cpu --mode dp --zero1
expect_error "--zero: not with --checkpoint" --backend cpu --mode ddp --zero1 --checkpoint "$T/c.st"

e2e_finish
