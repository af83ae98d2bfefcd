#!/bin/sh
# tests/e2e/e2e_report.sh: the reports as a user and a CI job meet them: --json
# (one line, nothing else on stdout), --csv (header + one row per run), the
# --baseline gate's exit codes and its verdict lines (0 same run, 3 doctored, 2 other configuration
# or bad file), --trace (written, renamed, no leftovers; dp's copies and
# ddp's buckets on the comm lane), --explain (single, dp, ddp), the
# progress line in every mode (never when stderr is not a terminal; there when it is),
# compare (side by side once dp/ddp exist, a clean error until then), and
# bench/sweep.sh.
# Usage: sh tests/e2e/e2e_report.sh ./ddpbench
E2E=e2e_report
. "$(dirname "$0")/lib.sh"

# short, stable runs: seed-linear (batch 20) on the CPU
S="--mode single --model seed-linear --backend cpu --steps 40"

# ---- --json -------------------------------------------------------------------------
"$BIN" $S --json >"$T/run.json" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] && ok || ko "--json: exit $rc: $(cat "$T/err")"
[ "$(wc -l <"$T/run.json")" -eq 1 ] && ok || ko "--json: stdout is not one line: $(head -3 "$T/run.json")"
grep -q '^{"schema_version":1,"tool":"ddpbench","config":{"mode":"single"' "$T/run.json" && grep -q '}$' "$T/run.json" &&
    ok || ko "--json: not an object of schema 1: $(head -c 200 "$T/run.json")"
grep -q "^ddpbench 0" "$T/err" && grep -q "loss" "$T/err" && ok || ko "--json: banner and loss lines belong on stderr: $(cat "$T/err")"
for k in throughput_samples_per_s step_time_s phases_s_per_step mem_peak_bytes final_loss checksum environment versions; do
    grep -q "\"$k\"" "$T/run.json" && ok || ko "--json: no key $k"
done
if need python3; then
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/run.json" && ok || ko "--json: python cannot parse it"
fi

# ---- --csv ----------------------------------------------------------------------------
"$BIN" $S --csv >"$T/run.csv" 2>/dev/null && ok || ko "--csv: exit $?"
[ "$(wc -l <"$T/run.csv")" -eq 2 ] && ok || ko "--csv: not header + one row: $(cat "$T/run.csv")"
hdr=$(head -1 "$T/run.csv" | awk -F, '{ print NF }')
row=$(tail -1 "$T/run.csv" | awk -F, '{ print NF }')
[ "$hdr" -eq "$row" ] && [ "$hdr" -gt 20 ] && ok || ko "--csv: $hdr header fields, $row row fields"
head -1 "$T/run.csv" | grep -q "^mode,backend,devices," && tail -1 "$T/run.csv" | grep -q "^single,cpu,1,seed-linear," &&
    ok || ko "--csv: $(cat "$T/run.csv")"

# ---- --baseline -----------------------------------------------------------------------
# Timings on a shared 2-core machine swing by 3x, so these runs use ms-long
# steps and wide margins; the exact arithmetic (a 50% faster baseline fails
# a 5% tolerance) is unit-tested on fixed numbers in test_report.c.
B="--mode single --model mlp-small --backend cpu --steps 12"
"$BIN" $B --json >"$T/base.json" 2>/dev/null || ko "--baseline: could not make a baseline"
# same configuration: the gate passes (tolerance 90: only a 10x slowdown fails)
"$BIN" $B --quiet --baseline "$T/base.json" --tolerance 90 >"$T/out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^verdict: \(no change\|improved\): .* samples/s .*is .*% \(below\|above\) the baseline" "$T/out" &&
    ok || ko "--baseline same run: exit $rc: $(tail -2 "$T/out")"
# under --json the verdict goes to stderr and stdout stays one JSON line
"$BIN" $B --json --baseline "$T/base.json" --tolerance 90 >"$T/out" 2>"$T/err"
[ "$(wc -l <"$T/out")" -eq 1 ] && grep -q "^verdict: \(no change\|improved\)" "$T/err" && ok ||
    ko "--baseline --json: stdout $(wc -l <"$T/out") lines, stderr: $(tail -1 "$T/err")"
# doctored: the baseline claims 1000x the throughput it measured
awk '{ if (match($0, /"throughput_samples_per_s":[0-9.eE+-]+/)) {
         v = substr($0, RSTART + 27, RLENGTH - 27) * 1000
         $0 = substr($0, 1, RSTART - 1) "\"throughput_samples_per_s\":" v substr($0, RSTART + RLENGTH) }
       # the gate reads the median step too: 1000x the throughput is a 1000th of it
       if (match($0, /"p50":[0-9.eE+-]+/)) {
         v = substr($0, RSTART + 6, RLENGTH - 6) / 1000
         $0 = substr($0, 1, RSTART - 1) "\"p50\":" v substr($0, RSTART + RLENGTH) }
       print }' "$T/base.json" >"$T/doctored.json"
"$BIN" $B --quiet --baseline "$T/doctored.json" --tolerance 5 >"$T/out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "^verdict: regressed: .* samples/s is .*% below the baseline .* (tolerance 5%)" "$T/out" &&
    ok || ko "--baseline doctored: exit $rc, expected 3: $(tail -2 "$T/out")"

expect_error "batch is 20 there, 10 here" $S --quiet --batch 10 --baseline "$T/run.json"
expect_error "optimizer.name" $S --quiet --optim adam --baseline "$T/run.json"
expect_error "holds no dp run" --mode dp --model seed-linear --backend cpu --quiet --baseline "$T/run.json"
expect_error "cannot open" $S --quiet --baseline "$T/missing.json"
printf '{"schema_version":1,"config":' >"$T/cut.json"
expect_error "not valid JSON" $S --quiet --baseline "$T/cut.json"
printf '{"schema_version":1}\n' >"$T/nokeys.json"
expect_error "config.mode is missing" $S --quiet --baseline "$T/nokeys.json"
head -c 2000000 /dev/zero | tr '\0' ' ' >"$T/huge.json"
expect_error "bytes" $S --quiet --baseline "$T/huge.json"
expect_error "not a regular file" $S --quiet --baseline "$T"

# ---- --trace ----------------------------------------------------------------------------
"$BIN" $S --quiet --trace "$T/trace.json" >/dev/null 2>"$T/err" && ok || ko "--trace: $(cat "$T/err")"
[ -s "$T/trace.json" ] && head -c 40 "$T/trace.json" | grep -q '^{"displayTimeUnit":"ms","traceEvents":\[' &&
    ok || ko "--trace: no trace: $(head -c 100 "$T/trace.json")"
for ph in data forward loss backward optimizer "step 40"; do
    grep -q "\"name\":\"$ph\"" "$T/trace.json" && ok || ko "--trace: no '$ph' event"
done
[ "$(ls "$T" | grep -c 'trace.json.tmp')" -eq 0 ] && ok || ko "--trace: temporary file left: $(ls "$T")"
if need python3; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["traceEvents"]) > 100' "$T/trace.json" &&
        ok || ko "--trace: python cannot parse it"
fi
expect_error "cannot create a file in directory" $S --quiet --trace "$T/no/such/dir/t.json"
expect_error "is a directory" $S --quiet --trace "$T"

# dp and ddp: a process per device, every phase, and the copies / buckets on the comm lane
DPS="--mode dp --gpus 0,1,2 --model seed-linear --backend cpu --steps 12 --accum 2"
DDPS="--mode ddp --gpus 0,1 --layers 10,64,64,10 --bucket-mb 0.01 --first-bucket-mb 0.005 --backend cpu --steps 12"
"$BIN" $DPS --quiet --trace "$T/dp.json" >/dev/null 2>"$T/err" && ok || ko "dp --trace: $(cat "$T/err")"
"$BIN" $DDPS --quiet --trace "$T/ddp.json" >/dev/null 2>"$T/err" && ok || ko "ddp --trace: $(cat "$T/err")"
if need python3; then
    cat >"$T/tr.py" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
want_devices, phases, comm = int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4].split(",")
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
assert d["otherData"]["dropped_events"] == 0, "events dropped"
pids = sorted({e["pid"] for e in ev})
assert len(pids) == want_devices, "processes %s" % pids
for pid in pids:
    names = {e["name"] for e in ev if e["pid"] == pid and e["tid"] == 0}
    for ph in phases:
        assert ph in names, "pid %d has no %s event: %s" % (pid, ph, sorted(names))
    lane = [e for e in ev if e["pid"] == pid and e["tid"] == 1]
    assert all(e["cat"] == "comm" and e["args"].get("bytes", 0) > 0 for e in lane), "comm events without bytes"
    for c in comm:
        first, _, who = c.partition("@")
        if who and int(who) != pid - 1:
            continue
        assert any(e["name"].startswith(first) for e in lane), "pid %d: no '%s' on the comm lane" % (pid, first)
EOF2
    # seed-linear's arena is under COMM_LOCAL_SLICED floats, so it moves whole on
    # the CPU: each replica's thread copies its own, device 0 sums them all
    python3 "$T/tr.py" "$T/dp.json" 3 forward,backward,replicate,reduce,idle,"step 12" \
        "replicate to 1@1,replicate to 2@2,reduce@0,gather from 1@0,gather from 2@0,scatter to 1@1,scatter to 2@2" 2>"$T/err" &&
        ok || ko "dp --trace: $(tail -1 "$T/err")"
    python3 "$T/tr.py" "$T/ddp.json" 2 data,forward,loss,backward,"comm exposed",optimizer,"step 12" \
        "all-reduce bucket 0,all-reduce bucket 1,all-reduce bucket 2" 2>"$T/err" &&
        ok || ko "ddp --trace: $(tail -1 "$T/err")"
fi

# ---- --explain -------------------------------------------------------------------------
"$BIN" $S --quiet --explain >"$T/out" 2>&1 && grep -q "^explain: step [0-9]* of single on cpu, 1 device (the middle timed step" "$T/out" &&
    grep -q "went whole to device 0" "$T/out" && ok || ko "--explain: $(cat "$T/out")"
"$BIN" $DPS --quiet --explain >"$T/out" 2>&1 && grep -q "^explain: step [0-9]* of dp on cpu, 3 devices (the middle timed step" "$T/out" &&
    grep -q "split like torch.chunk: device 0 14, device 1 14, device 2 12" "$T/out" &&
    grep -q "replicate: 880 B of parameters copied from device 0 to the other 2 devices" "$T/out" &&
    grep -q "gather: .* of outputs brought to device 0" "$T/out" &&
    grep -q "reduce: 880 B of parameter gradients summed onto device 0" "$T/out" &&
    ok || ko "dp --explain: $(cat "$T/out")"
"$BIN" $DDPS --quiet --explain >"$T/out" 2>&1 && grep -q "^explain: step [0-9]* of ddp on cpu, 2 devices (the middle timed step" "$T/out" &&
    grep -q "Backward on rank 0 took" "$T/out" && grep -q "bucket 0 (layers 2-[0-9], .*): ready at .*, all-reduce .* to " "$T/out" &&
    grep -q "bucket 2 (layers" "$T/out" && grep -q "broadcast: " "$T/out" && grep -q "^      bucket 2  |" "$T/out" &&
    ok || ko "ddp --explain: $(cat "$T/out")"

# ---- dp and ddp: --json keys and the --baseline gate -------------------------------------
for M in "$DPS" "$DDPS"; do
    name=$(echo "$M" | awk '{ print $2 }')
    "$BIN" $M --json >"$T/m.json" 2>/dev/null && [ "$(wc -l <"$T/m.json")" -eq 1 ] &&
        grep -q "^{\"schema_version\":1,\"tool\":\"ddpbench\",\"config\":{\"mode\":\"$name\"" "$T/m.json" &&
        ok || ko "$name --json: $(head -c 200 "$T/m.json")"
    for k in throughput_samples_per_s step_time_s phases_s_per_step comm_exposed_s comm_hidden_s \
        mem_peak_bytes final_loss checksum environment versions; do
        grep -q "\"$k\"" "$T/m.json" && ok || ko "$name --json: no key $k"
    done
    "$BIN" $M --quiet --baseline "$T/m.json" --tolerance 90 >"$T/out" 2>&1 &&
        grep -q "^verdict: \(no change\|improved\)" "$T/out" && ok || ko "$name --baseline same: $(cat "$T/out")"
    awk '{ if (match($0, /"throughput_samples_per_s":[0-9.eE+-]+/)) {
             v = substr($0, RSTART + 27, RLENGTH - 27) * 1000
             $0 = substr($0, 1, RSTART - 1) "\"throughput_samples_per_s\":" v substr($0, RSTART + RLENGTH) }
       # the gate reads the median step too: 1000x the throughput is a 1000th of it
       if (match($0, /"p50":[0-9.eE+-]+/)) {
         v = substr($0, RSTART + 6, RLENGTH - 6) / 1000
         $0 = substr($0, 1, RSTART - 1) "\"p50\":" v substr($0, RSTART + RLENGTH) }
           print }' "$T/m.json" >"$T/doctored.json"
    "$BIN" $M --quiet --baseline "$T/doctored.json" --tolerance 5 >"$T/out" 2>&1
    rc=$?
    [ $rc -eq 3 ] && grep -q "^verdict: regressed: " "$T/out" && ok || ko "$name --baseline doctored: exit $rc"
done

# ---- the progress line ---------------------------------------------------------------------
# stderr to a file: never a \r, under any option set, in any mode
for mode in "single" "dp --gpus 0,1" "ddp --gpus 0,1"; do
    for extra in "" "--json" "--csv" "--log-every 1"; do
        "$BIN" --mode $mode --model mlp-small --backend cpu --epochs 2 $extra >/dev/null 2>"$T/err"
        if grep -q "$(printf '\r')" "$T/err"; then ko "progress line in a file ($mode $extra)"; else ok; fi
        if grep -q "ETA" "$T/err"; then ko "progress text in a file ($mode $extra)"; else ok; fi
    done
done
# on a terminal (script(1) gives one) it appears, and --quiet silences it;
# its loss is the last one the loss log took, named by its step (32 steps per
# epoch, logged at each epoch's end: steps 32, 64, 96), never a step's that
# logs none (no mode fetches a loss for the line)
if need script; then
    for mode in "single" "dp --gpus 0,1" "ddp --gpus 0,1"; do
        name=${mode%% *}
        script -qec "$BIN --mode $mode --model mlp-small --backend cpu --epochs 3" /dev/null >"$T/tty" 2>&1
        grep -q "$name  step .*samples/s  ETA" "$T/tty" && ok || ko "$name: progress line missing on a terminal: $(head -c 300 "$T/tty")"
        bad=$(grep -ao "loss [0-9.]* (step [0-9]*)" "$T/tty" | sed 's/.*(step \([0-9]*\))/\1/' | awk '$1 % 32 != 0')
        [ -z "$bad" ] && ! grep -aq "loss -" "$T/tty" && ok || ko "$name: the line shows a loss the log did not take (step $bad): $(head -c 300 "$T/tty")"
        script -qec "$BIN --mode $mode --model mlp-small --backend cpu --epochs 3 --quiet" /dev/null >"$T/tty" 2>&1
        if grep -q "ETA" "$T/tty"; then ko "$name: --quiet still draws the progress line"; else ok; fi
    done
fi

# ---- compare -----------------------------------------------------------------------------
C="--model seed-linear --backend cpu --steps 20 --gpus 0,1"
if "$BIN" --mode dp $C --quiet >/dev/null 2>&1 && "$BIN" --mode ddp $C --quiet >/dev/null 2>&1; then
    "$BIN" --mode compare $C >"$T/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && grep -q "^compare: seed-linear on cpu, 2 devices" "$T/out" &&
        grep -q "parameters: dp vs single agree" "$T/out" && grep -q "parameters: ddp vs single agree" "$T/out" &&
        ok || ko "compare: exit $rc: $(cat "$T/out")"
    "$BIN" --mode compare $C --json >"$T/out" 2>/dev/null
    [ "$(wc -l <"$T/out")" -eq 3 ] && [ "$(grep -c '"compare":{"speedup_vs_single"' "$T/out")" -eq 3 ] &&
        ok || ko "compare --json: not three objects: $(cat "$T/out")"
    "$BIN" --mode compare $C --csv >"$T/out" 2>/dev/null
    [ "$(wc -l <"$T/out")" -eq 4 ] && ok || ko "compare --csv: not header + 3 rows"
    "$BIN" --mode compare $C --json >"$T/base.jsonl" 2>/dev/null
    # tolerance 100 never fails: this checks that each run finds its own baseline line
    "$BIN" --mode compare $C --quiet --baseline "$T/base.jsonl" --tolerance 100 >"$T/out" 2>&1
    [ $? -eq 0 ] && [ "$(grep -c "^verdict: \(no change\|improved\)" "$T/out")" -eq 3 ] && ok || ko "compare --baseline: $(cat "$T/out")"
else
    # dp/ddp not built in this tree: compare stops cleanly at the dp run
    "$BIN" --mode compare $C >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
        grep -q "^ddpbench: error: --mode compare: the dp run: .*not built yet" "$T/err" &&
        ok || ko "compare without dp: exit $rc: $(cat "$T/err")"
fi
# the verdict names the cause: 100 samples over 3 ranks are padded to 102;
# compare gives single and dp the same stream (all agree), --sampler-replicas 1
# gives them the plain 100 (ddp DIFFERs, "not the same samples"), and
# --drop-last cuts every stream to the same 96 (all agree)
L="--model seed-logreg --backend cpu --gpus 0,1,2 --batch 12"
"$BIN" $L >"$T/out" 2>&1
grep -q "parameters: ddp vs single agree" "$T/out" && grep -q "pads 100 samples to 102" "$T/out" &&
    ok || ko "compare seed-logreg: $(cat "$T/out")"
"$BIN" $L --sampler-replicas 1 >"$T/out" 2>&1
grep -q "parameters: ddp vs single DIFFER" "$T/out" && grep -q "not the same samples: ddp trained on 102 samples" "$T/out" &&
    grep -q "parameters: dp vs single agree" "$T/out" && ! grep -q "ReLU" "$T/out" &&
    ok || ko "compare seed-logreg --sampler-replicas 1: $(cat "$T/out")"
"$BIN" $L --sampler-replicas 1 --drop-last >"$T/out" 2>&1
grep -q "parameters: ddp vs single agree" "$T/out" && ok || ko "compare --drop-last: $(cat "$T/out")"
# --precision bf16: compare judges with the bf16 row of the contract (docs/gpu.md;
# mlp-small's dp and ddp end 1e-4 to 2e-4 from single, far past fp32's 1e-5),
# and a run's table says the precision
"$BIN" --backend cpu --gpus 0,1 --steps 12 --precision bf16 >"$T/out" 2>&1
grep -q "parameters: dp vs single agree" "$T/out" && grep -q "parameters: ddp vs single agree" "$T/out" &&
    ok || ko "compare --precision bf16: $(cat "$T/out")"
"$BIN" --backend cpu --mode single --steps 3 --precision bf16 >"$T/out" 2>&1
grep -q "^  precision  *bf16 (autocast" "$T/out" && ok || ko "--precision bf16: the table does not say it: $(cat "$T/out")"
# compare --precision fp32,bf16: single, dp and ddp again in bf16, each judged
# against its own precision's single, with the rows that show what faster
# compute does to the communication a step waits for: figures, no verdict
# (on the CPU bf16 rounds in software and is slower: docs/modes.md)
P="--backend cpu --gpus 0,1 --model seed-logreg --steps 6"
if "$BIN" $P --precision fp32,bf16 >"$T/out" 2>"$T/err"; then
    grep -q "precision fp32 then bf16" "$T/out" && grep -q "single bf16 *dp bf16 *ddp bf16" "$T/out" &&
        grep -q "parameters: dp bf16 vs single bf16 agree" "$T/out" &&
        grep -q "parameters: ddp bf16 vs single bf16 agree" "$T/out" &&
        grep -q "parameters: ddp vs single agree" "$T/out" &&
        grep "^  comm waited, % of step " "$T/out" | sed 's/.*of step//' |
        awk '{ exit !(NF == 6 && $1 == "-" && $4 == "-" && $2 ~ /%$/ && $3 ~ /%$/ && $5 ~ /%$/ && $6 ~ /%$/) }' &&
        grep -q "^  compute per step (.s)" "$T/out" && grep -q "^  comm waited per step (.s)" "$T/out" &&
        ! grep -qi "bf16.*\(faster\|slower\|hides\)" "$T/out" &&
        ok || ko "compare --precision fp32,bf16: $(cat "$T/out")"
else
    ko "compare --precision fp32,bf16: $(cat "$T/err")"
fi
"$BIN" $P --precision fp32,bf16 --json 2>/dev/null | python3 -c '
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
got = [(r["config"]["mode"], r["config"]["precision"]) for r in runs]
want = [(m, p) for p in ("fp32", "bf16") for m in ("single", "dp", "ddp")]
sys.exit(0 if got == want else 1)
' && ok || ko "compare --precision fp32,bf16 --json: not six runs, fp32 then bf16"
expect_error "--precision: a list of precisions is for --mode compare" $P --mode ddp --precision fp32,bf16
expect_error "--precision: bf16 twice" $P --precision bf16,bf16
expect_error "--precision: unknown value 'fp16'" $P --precision fp32,fp16
expect_error "--precision: a list is not with --zero" $P --precision fp32,bf16 --zero 2
expect_error "--precision with a list: not with --repeat" $P --precision fp32,bf16 --repeat 2
# Adam after a few steps: the worst parameter is judged in units of lr x steps
"$BIN" --backend cpu --gpus 0,1 --steps 8 >"$T/out" 2>&1
[ "$(grep -c "vs single agree (relative L2 distance .*of lr x steps)" "$T/out")" -eq 2 ] && ok ||
    ko "compare --steps 8 (adam): $(grep parameters "$T/out")"
# a model with no hidden layer has no activation
"$BIN" --model seed-linear --backend cpu --mode single --steps 2 --json 2>/dev/null | grep -q '"act":"none"' &&
    ok || ko "seed-linear: act is not none"
# --batch-per-device: compare says what the global batch and the learning rate are
"$BIN" --model seed-linear --backend cpu --gpus 0,1 --batch-per-device 8 --steps 4 >"$T/out" 2>&1
grep -q "global batch 16" "$T/out" && grep -q "batch-per-device 8 on 2 devices makes the global batch 16" "$T/out" &&
    ok || ko "--batch-per-device: $(cat "$T/out")"

# the default is compare on mlp-small
"$BIN" --backend cpu --help | grep -q "\[compare\]" && ok || ko "--help: default mode is not compare"
# --help's deal of 256 rows over 3 devices is what dp and ddp do (--explain names the rows)
h=$("$BIN" --help | tr -s ' \n' ' ')
for m in "dp:86, 86, 84:device 0 86, device 1 86, device 2 84" "ddp:86, 85, 85:device 0 86, device 1 85, device 2 85"; do
    mode=${m%%:*} rest=${m#*:}
    echo "$h" | grep -q "${rest%%:*}" || ko "--help does not say $mode deals ${rest%%:*}"
    "$BIN" --mode "$mode" --model seed-linear --layers 10,10 --batch 256 --samples 512 --gpus 0,1,2 \
        --backend cpu --steps 1 --warmup-steps 0 --explain --quiet >"$T/out" 2>&1
    grep -q "${rest#*:}\." "$T/out" && ok || ko "$mode does not deal ${rest#*:}: $(grep rows "$T/out")"
done

# ---- bench/sweep.sh ------------------------------------------------------------------------
SWEEP=$(dirname "$0")/../../bench/sweep.sh
# -h prints the usage comment, no line of the script itself
sh "$SWEEP" -h >"$T/help" 2>&1 && grep -q '^usage: bench/sweep.sh' "$T/help" &&
    ! grep -q 'set -eu\|^BIN=\|getopts' "$T/help" && ok || ko "sweep -h: $(cat "$T/help")"
modes=single
"$BIN" --mode dp $C --quiet >/dev/null 2>&1 && "$BIN" --mode ddp $C --quiet >/dev/null 2>&1 && modes="single dp ddp"
plot=
need gnuplot || plot=-p
sh "$SWEEP" -b "$BIN" -m seed-linear -n 2 -s 6 -M "$modes" -o "$T/sweep" $plot -- --backend cpu 2>"$T/err"
rc=$?
want=$((1 + 2 * ($(echo "$modes" | wc -w) - 1)))
[ $rc -eq 0 ] && [ "$(tail -n +2 "$T/sweep/sweep.csv" | wc -l)" -eq $want ] && ok ||
    ko "sweep: exit $rc, $(tail -n +2 "$T/sweep/sweep.csv" 2>/dev/null | wc -l) rows, want $want: $(cat "$T/err")"
if [ -z "$plot" ]; then
    grep -q "<svg" "$T/sweep/throughput.svg" && grep -q "<svg" "$T/sweep/efficiency.svg" && ok ||
        ko "sweep: no SVG charts"
fi
# strong scaling draws --predict's DP and DDP beside the measured points, on
# 1..8 devices: past the 2 measured
[ "$modes" = single ] || { [ "$(wc -l <"$T/sweep/predicted.txt" 2>/dev/null)" -eq 9 ] && ok ||
    ko "sweep: predicted.txt is not the header and 8 device counts: $(cat "$T/sweep/predicted.txt" 2>&1)"; }
# -r: every point run N times (a row each), drawn with its interval as error bars
sh "$SWEEP" -b "$BIN" -m seed-linear -n 1 -s 6 -M single -w weak -B 10 -r 3 -o "$T/rep" $plot -- --backend cpu 2>"$T/err"
rc=$?
[ $rc -eq 0 ] && [ "$(tail -n +2 "$T/rep/sweep.csv" | wc -l)" -eq 3 ] && ok ||
    ko "sweep -r 3: exit $rc, $(tail -n +2 "$T/rep/sweep.csv" 2>/dev/null | wc -l) rows, want 3: $(cat "$T/err")"
grep -q "run 3 of 3" "$T/err" && ok || ko "sweep -r 3: the runs are not counted: $(cat "$T/err")"
expect_sweep_error() { # WORDS ARGS...
    words=$1
    shift
    sh "$SWEEP" -b "$BIN" "$@" >/dev/null 2>"$T/err"
    rc=$?
    [ $rc -ne 0 ] && grep -qF -- "$words" "$T/err" && ok || ko "sweep $*: exit $rc: $(cat "$T/err")"
}
expect_sweep_error "-r: 'x' is not a run count" -r x
# -k: DDP's bucket cap swept on -n devices
if [ "$modes" != single ]; then
    sh "$SWEEP" -b "$BIN" -m seed-linear -n 2 -s 6 -k "0.0001 auto" -o "$T/bk" $plot -- --backend cpu 2>"$T/err"
    rc=$?
    [ $rc -eq 0 ] && [ "$(cut -d, -f1 "$T/bk/buckets.csv" | tr '\n' ' ')" = "bucket_mb 0.0001 auto " ] && ok ||
        ko "sweep -k: exit $rc: $(cat "$T/err" "$T/bk/buckets.csv" 2>&1)"
fi
# strong and weak: the global batch stays 20, or grows as 8 x devices
sh "$SWEEP" -b "$BIN" -m seed-linear -n 2 -s 6 -M "$modes" -w both -B 8 -o "$T/sw" $plot -- --backend cpu 2>"$T/err"
rc=$?
C=$(head -1 "$T/sw/weak/sweep.csv" | tr ',' '\n' | grep -n '^batch$' | cut -d: -f1)
[ $rc -eq 0 ] && [ "$(awk -F, -v c="$C" 'NR > 1 { print $3 ":" $c }' "$T/sw/weak/sweep.csv" | sort -u | tr '\n' ' ')" = "1:8 2:16 " ] &&
    [ "$(awk -F, -v c="$C" 'NR > 1 { print $c }' "$T/sw/strong/sweep.csv" | sort -u)" = 20 ] && ok ||
    ko "sweep -w both: exit $rc: $(cat "$T/err" "$T/sw/weak/sweep.csv")"
if [ -z "$plot" ]; then
    grep -q "weak scaling: 8 rows per device" "$T/sw/weak/throughput.svg" &&
        grep -q "strong scaling: global batch 20" "$T/sw/strong/efficiency.svg" && ok || ko "sweep -w both: chart titles"
fi

e2e_finish
