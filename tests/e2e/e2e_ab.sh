#!/bin/sh
# tests/e2e/e2e_ab.sh: the A/B gate (--against) end to end with fake BASE and
# CAND executables whose JSON and timing the test writes, so it is fast and
# deterministic: ABBA order, what the children are given, the four verdicts
# and their exit codes (0 no change, 3 regressed, 0 improved, 4 no verdict),
# the gate stopping at the first look that decides, at the most rounds or
# when --gate-budget runs out (and saying which), a straggler named by rank,
# attribution only beyond its noise, a disturbed round retaken and a busy
# machine blamed, --json with every round of both sides, --csv's interval and
# provenance columns, a failing child named (side, status, last stderr line:
# exit 1), a hung child stopped at its deadline and named (exit 1, nothing
# left), a child's background leftover that stalls no round and outlives
# none, the options that describe one run refused naming --against (exit 2),
# a base that is not executable (exit 2), and Ctrl-C reaching and reaping
# the child.
# Usage: sh tests/e2e/e2e_ab.sh ./ddpbench
E2E=e2e_ab
. "$(dirname "$0")/lib.sh"
S="--mode ddp --backend cpu --gpus 0,1"

# fake NAME FACTOR FB1 NOISE [DISTURBED] [FAIL]: an executable that logs its
# name, prints one ddpbench-like JSON object whose median step is 10 ms x
# FACTOR x the NOISE pattern's next entry, rank 1's forward+backward x FB1;
# DISTURBED: "machine.disturbed" true on its first DISTURBED calls; FAIL: it
# fails like a crashed run instead; WORK "W0 W1": a CPU run's work_cpu_s (p10
# 5 ms x W0 on rank 0 and x W1 on rank 1, x the NOISE entry's 1/4 power: the
# work moves far less than the wall), the run's the larger; COMM "C1 C2 ...":
# rank 1's exposed communication, seconds, the next entry each call (else 2 ms)
fake() {
    cat >"$T/$1" <<EOF
#!/bin/sh
n=\$(cat "$T/count.$1" 2>/dev/null || echo 0)
echo \$((n + 1)) >"$T/count.$1"
echo "$1 \$*" >>"$T/log"
if [ -n "${6:-}" ]; then echo "step 3: something went wrong" >&2; echo "boom: the last words" >&2; exit 7; fi
comm=0.002
if [ -n "${8:-}" ]; then set -- ${8:-}; shift \$((n % \$#)); comm=\$1; fi
set -- $4
shift \$((n % \$#))
dist=false
[ "\$n" -lt "${5:-0}" ] && dist=true
awk -v f="$2" -v fb="$3" -v j="\$1" -v d="\$dist" -v work="${7:-}" -v comm="\$comm" 'BEGIN {
  s = 0.010 * f * j
  nw = split(work, w, " ")
  wj = j ^ 0.25
  wk0 = nw ? sprintf("\"work_cpu_s\":{\"p10\":%.9f},", 0.005 * w[1] * wj) : ""
  wk1 = nw ? sprintf("\"work_cpu_s\":{\"p10\":%.9f},", 0.005 * w[2] * wj) : ""
  if (nw) printf "{\"work_cpu_s\":{\"p10\":%.9f},", 0.005 * (w[1] > w[2] ? w[1] : w[2]) * wj
  else printf "{"
  printf "\"step_time_s\":{\"p50\":%.9f},\"devices\":[", s
  printf "{%s\"phases_s_per_step\":{\"forward_s\":0.002,\"backward_s\":0.004,\"comm_exposed_s\":0.002}},", wk0
  printf "{%s\"phases_s_per_step\":{\"forward_s\":%.9f,\"backward_s\":%.9f,\"comm_exposed_s\":%.9f}}],", wk1, 0.002 * fb, 0.004 * fb, comm
  printf "\"environment\":{\"loadavg\":\"1.50 1.00 0.50\",\"revision\":\"r-$1\",\"host\":\"h1\",\"time_utc\":\"2026-01-01T00:00:00Z\"},"
  printf "\"machine\":{\"disturbed\":%s,\"why\":\"others took 60%% of its cores\"}}\n", d
}'
EOF
    chmod +x "$T/$1"
}
QUIET="1.00 1.004 0.998 1.002 0.996 1.001 0.999 1.003 0.997 1.000"
NOISY="1.00 1.25 0.80 1.15 0.87 1.20 0.83 1.10 0.90 1.05"

# --- unchanged: no change, exit 0, decided at a look; the children got --json and none of the gate's options
fake base 1.0 1.0 "$QUIET"
fake same 1.0 1.0 "$QUIET"
"$BIN" $S --steps 9 --against "$T/base" --candidate "$T/same" --tolerance 3 >"$T/out" 2>&1
rc=$?
[ $rc = 0 ] && ok || ko "unchanged: exit $rc, want 0: $(tail -3 "$T/out")"
grep -q "verdict: no change: within +-3%; after [0-9]* rounds in [0-9]* s: decided" "$T/out" && ok ||
    ko "unchanged: $(tail -3 "$T/out")"
# a warm-up of each side, then ABBA: B C | C B | B C | C B ..., whole pairs
rounds=$(sed -n 's/.* over \([0-9]*\) rounds;.*/\1/p' "$T/out")
want="base same "
i=0
while [ $i -lt "${rounds:-0}" ]; do
    if [ $((i % 2)) = 0 ]; then want="${want}base same "; else want="${want}same base "; fi
    i=$((i + 1))
done
order=$(awk '{ printf "%s ", $1 }' "$T/log")
[ "${rounds:-0}" -ge 8 ] && [ $((rounds % 2)) = 0 ] && [ "$order" = "$want" ] && ok ||
    ko "ABBA order over $rounds rounds: $order"
# it stopped at the first look that decided: every earlier look went on
[ "$(grep -c "look at .*: goes on" "$T/out")" = $((rounds / 2 - 1)) ] &&
    grep -q "look at $rounds rounds: .*: no change" "$T/out" && ok || ko "looks: $(grep look "$T/out")"
line=$(head -1 "$T/log")
case "$line" in
*--against* | *--candidate* | *--repeat* | *--tolerance* | *--gate-budget*) ko "a gate option reached the child: $line" ;;
*"--mode ddp --backend cpu --gpus 0,1 --steps 9 --json"*) ok ;;
*) ko "the child's options: $line" ;;
esac
# without --steps or --epochs the children run the gate's own length (16 steps)
: >"$T/log"
"$BIN" $S --against "$T/base" --candidate "$T/same" --repeat 8 >"$T/out" 2>&1
case "$(head -1 "$T/log")" in
*"--gpus 0,1 --steps 16 --json") grep -q "each run 16 steps (--steps sets it)" "$T/out" && ok || ko "length: $(head -1 "$T/out")" ;;
*) ko "the child's length: $(head -1 "$T/log")" ;;
esac
: >"$T/log"
"$BIN" $S --epochs 1 --against "$T/base" --candidate "$T/same" --repeat 8 >/dev/null 2>&1
case "$(head -1 "$T/log")" in
*--steps*) ko "--epochs given, yet the child got --steps: $(head -1 "$T/log")" ;;
*"--epochs 1 --json") ok ;;
*) ko "the child's options with --epochs: $(head -1 "$T/log")" ;;
esac

# --- a 10% slowdown on rank 1 (forward+backward +25%): regressed, exit 3, the straggler named
fake slow 1.10 1.25 "$QUIET"
"$BIN" $S --against "$T/base" --candidate "$T/slow" --repeat 8 >"$T/out" 2>&1
rc=$?
[ $rc = 3 ] && ok || ko "regressed: exit $rc, want 3: $(tail -4 "$T/out")"
grep -q "verdict: regressed" "$T/out" && ok || ko "regressed: $(cat "$T/out")"
grep -q "attribution: rank 1 forward+backward +25.0%" "$T/out" && ok || ko "attribution: $(tail -4 "$T/out")"
grep -q "straggler: rank 1 (forward+backward +25.0%; rank 0 +0.0%)" "$T/out" && ok ||
    ko "straggler: $(tail -4 "$T/out")"

# --- 15% faster: improved, exit 0, said
fake fast 0.85 0.85 "$QUIET"
"$BIN" $S --against "$T/base" --candidate "$T/fast" --repeat 8 >"$T/out" 2>&1
rc=$?
[ $rc = 0 ] && ok || ko "improved: exit $rc, want 0"
grep -q "verdict: improved" "$T/out" && ok || ko "improved: $(tail -3 "$T/out")"

# --- 6% slower through +-20% noise: no verdict at the most rounds, exit 4, saying why it stopped
fake noisy 1.06 1.0 "$NOISY"
"$BIN" $S --against "$T/base" --candidate "$T/noisy" --repeat 10 >"$T/out" 2>&1
rc=$?
[ $rc = 4 ] && ok || ko "no verdict: exit $rc, want 4: $(tail -3 "$T/out")"
grep -q "verdict: no verdict: the interval straddles the 5% tolerance; after 10 rounds in [0-9]* s: the most rounds (--repeat 10)" "$T/out" &&
    ok || ko "no verdict: $(tail -3 "$T/out")"
# too few most rounds for any interval: refused before a run
expect_error "--repeat 3 with --against: so few rounds give no 95% interval valid at every look; at least 6 do" \
    $S --against "$T/base" --candidate "$T/same" --repeat 3
# the budget: each child 0.3 s, 2.5 s of budget: it stops before a pair that would not fit
cat >"$T/slowfake" <<EOF
#!/bin/sh
sleep 0.3
exec "$T/same" "\$@"
EOF
chmod +x "$T/slowfake"
t0=$(date +%s.%N)
"$BIN" $S --against "$T/slowfake" --candidate "$T/slowfake" --gate-budget 2.5 >"$T/out" 2>&1
rc=$?
t1=$(date +%s.%N)
[ $rc = 4 ] && grep -q "verdict: no verdict: [0-9]* rounds give no interval yet; after [0-9]* rounds in [0-9]* s: the budget ran out (--gate-budget 2.5 s" "$T/out" &&
    awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 2.5 + 1.0) }' && ok ||
    ko "budget: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s: $(tail -2 "$T/out")"
expect_error "--gate-budget: needs --against" $S --gate-budget 30

# --- lopsided rounds (the candidate disturbed, the base not): retaken, twice at most in 6
: >"$T/log"
fake dist 1.0 1.0 "$QUIET" 3
"$BIN" $S --against "$T/base" --candidate "$T/dist" --repeat 6 --json >"$T/ab.json" 2>"$T/err"
rc=$?
[ $rc = 0 ] && ok || ko "retaken: exit $rc: $(tail -3 "$T/err")"
python3 - "$T/ab.json" <<'EOF' && ok || ko "--json: $(head -c 400 "$T/ab.json")"
import json, sys
o = json.load(open(sys.argv[1]))
ab, rs = o["ab"], o["rounds"]
assert ab["verdict"] == "no change" and ab["exit_status"] == 0, ab
assert len(rs) == 9, len(rs)                      # the warm-up, 6 rounds, 2 retaken
assert [r["used"] for r in rs[:5]] == [False, False, False, True, True], [r["used"] for r in rs]
assert [r["round"] for r in rs[:5]] == [0, 1, 1, 1, 2], [r["round"] for r in rs]
for r in rs:                                       # every round, both sides, whole
    assert r["base"]["step_time_s"]["p50"] > 0 and r["candidate"]["step_time_s"]["p50"] > 0
    assert r["base"]["environment"]["revision"] == "r-base"
assert ab["estimate"]["rounds"] == 6 and ab["estimate"]["lo"] <= ab["estimate"]["ratio"] <= ab["estimate"]["hi"]
assert ab["figure"] == "step_time_s.p50" and ab["order"] == "ABBA"
EOF
# a candidate disturbed every time and 10% slower: the busy machine is blamed, not a phase
fake busy 1.10 1.0 "$QUIET" 1000
"$BIN" $S --against "$T/base" --candidate "$T/busy" --repeat 6 >"$T/out" 2>&1
rc=$?
[ $rc = 4 ] && grep -q "verdict: no verdict: a busy machine: 6 of 6 rounds ran with one side disturbed (round 1's candidate: others took 60% of its cores)" "$T/out" && ok ||
    ko "busy machine: exit $rc: $(tail -3 "$T/out")"

# a child's words are shown escaped: control codes in its machine.why and its host
fake busyesc 1.10 1.0 "$QUIET" 1000
sed -i -e 's/others took 60%% of its cores/\\\\u001b[31mpwn\\\\r/' \
    -e 's/\\"h1\\"/\\"\\\\u001b[2Jh1\\"/' "$T/busyesc"
"$BIN" $S --against "$T/base" --candidate "$T/busyesc" --repeat 6 >"$T/out" 2>&1
rc=$?
[ $rc = 4 ] && grep -qF "(round 1's candidate: \x1b[31mpwn\r)" "$T/out" &&
    ! grep -q "$(printf '\033')" "$T/out" && ok || ko "a child's control codes: exit $rc: $(tail -3 "$T/out")"
"$BIN" $S --against "$T/busyesc" --candidate "$T/base" --repeat 6 --csv >"$T/out" 2>&1
grep -qF ',\x1b[2Jh1,' "$T/out" && ! grep -q "$(printf '\033')" "$T/out" && ok ||
    ko "a child's control codes in --csv: $(tail -2 "$T/out")"
# a figure no run measures (a base's work of 1e-320 s, whose ratio overflowed to "+inf%")
printf '#!/bin/sh\necho %s\n' "'{\"work_cpu_s\":{\"p10\":1e-320},\"step_time_s\":{\"p50\":0.01}}'" \
    >"$T/tiny" && chmod +x "$T/tiny"
fake wtiny 1.0 1.0 "$QUIET" 0 "" "1.0 1.0"
"$BIN" $S --against "$T/tiny" --candidate "$T/wtiny" --repeat 6 >"$T/out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "the base's JSON in the warm-up run has work_cpu_s.p10 .*: not a time" \
    "$T/out" && ok || ko "a base's work of 1e-320 s: exit $rc: $(tail -3 "$T/out")"

# noisy and disturbed on both sides: no verdict naming the busy machine, no phase blamed
fake busybase 1.0 1.0 "$QUIET" 1000
fake noisybusy 1.06 1.0 "$NOISY" 1000
"$BIN" $S --against "$T/busybase" --candidate "$T/noisybusy" --repeat 10 >"$T/out" 2>&1
rc=$?
[ $rc = 4 ] && grep -q "the most rounds (--repeat 10): a larger --gate-budget or a quieter machine would settle it; a busy machine: 0 of 10 rounds ran with one side disturbed, 10 with both; e.g. others took 60% of its cores" "$T/out" &&
    grep -q "attribution: none (a busy machine moves every phase)" "$T/out" && ok ||
    ko "busy on both sides, noisy: exit $rc: $(tail -3 "$T/out")"
# both sides disturbed every time (a machine busy throughout): paired noise, not an
# excuse: the 10% slowdown is still called
"$BIN" $S --against "$T/busybase" --candidate "$T/busy" --repeat 6 >"$T/out" 2>&1
rc=$?
[ $rc = 3 ] && grep -q "verdict: regressed" "$T/out" && ok ||
    ko "busy on both sides: exit $rc: $(tail -3 "$T/out")"

# --- on the CPU the work is judged (work_cpu_s.p10), not the median step
# the wall 6% slower through +-20% noise, rank 1's work 10% more: regressed by
# the work, rank 1 named from its own work
fake wbase 1.0 1.0 "$QUIET" 0 "" "1.0 1.0"
fake wslow 1.06 1.0 "$NOISY" 0 "" "1.0 1.10"
"$BIN" $S --against "$T/wbase" --candidate "$T/wslow" --repeat 10 --json >"$T/ab.json" 2>"$T/out"
rc=$?
[ $rc = 3 ] && grep -q "candidate / base, work per step (CPU seconds, p10): 1.1" "$T/out" &&
    grep -q "verdict: regressed: the candidate is slower by" "$T/out" &&
    grep -q "straggler: rank 1 (work +1[01].[0-9]%; rank 0 +[0-2].[0-9]%)" "$T/out" && ok ||
    ko "work figure: exit $rc: $(tail -5 "$T/out")"
python3 - "$T/ab.json" <<'EOF' && ok || ko "work figure --json: $(head -c 300 "$T/ab.json")"
import json, sys
ab = json.load(open(sys.argv[1]))["ab"]
assert ab["figure"] == "work_cpu_s.p10" and ab["straggler"] == 1, ab
assert abs(ab["work_ratio_by_device"][1]["ratio"] - 1.10) < 0.02 and not ab["wall_judged"], ab
assert ab["work_ratio_by_device"][1]["lo"] > 1.0 and ab["stopped"] == "decided", ab
assert ab["wall"]["rounds"] == 10 and ab["wall"]["lo"] < 1.05 < ab["wall"]["hi"], ab["wall"]
EOF
# the same work, the wall 20% slower on quiet rounds: the step waits longer: regressed
fake wwait 1.20 1.0 "$QUIET" 0 "" "1.0 1.0"
"$BIN" $S --against "$T/wbase" --candidate "$T/wwait" --repeat 8 >"$T/out" 2>&1
rc=$?
[ $rc = 3 ] && grep -q "verdict: regressed: the median step grew +1[0-9].[0-9]% at least while the work did not ([-+]0.0%): the step waits longer" "$T/out" &&
    ok || ko "wall judged on quiet rounds: exit $rc: $(tail -4 "$T/out")"
# ... but not when the rounds were disturbed (both sides): the machine, not the build
fake wbusybase 1.0 1.0 "$QUIET" 1000 "" "1.0 1.0"
fake wbusywait 1.20 1.0 "$QUIET" 1000 "" "1.0 1.0"
"$BIN" $S --against "$T/wbusybase" --candidate "$T/wbusywait" --repeat 8 >"$T/out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "verdict: no change" "$T/out" && grep -q "not judged: disturbed rounds" "$T/out" && ok ||
    ko "wall not judged on disturbed rounds: exit $rc: $(tail -4 "$T/out")"

# --- --csv: one row per round (the warm-up first) with the interval and the provenance
"$BIN" $S --against "$T/base" --candidate "$T/same" --repeat 6 --csv >"$T/ab.csv" 2>"$T/err"
head -1 "$T/ab.csv" | grep -q "ratio_lo,ratio_hi,.*base_revision,candidate_revision,host,base_time_utc,.*base_load1" &&
    ok || ko "--csv header: $(head -1 "$T/ab.csv")"
[ "$(wc -l <"$T/ab.csv")" = 8 ] && sed -n 2p "$T/ab.csv" | grep -q ",r-base,r-same,h1,2026-01-01T00:00:00Z,.*,1.50,1.50$" &&
    ok || ko "--csv rows: $(cat "$T/ab.csv")"

# --- --csv with --repeat (no --against): the interval and the provenance columns, filled
"$BIN" --mode single --model seed-linear --steps 30 --backend cpu --repeat 2 --csv >"$T/rep.csv" 2>"$T/err"
python3 - "$T/rep.csv" <<'EOF' && ok || ko "--repeat --csv: $(cat "$T/rep.csv") $(cat "$T/err")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 1, rows
r = rows[0]
assert r["runs"] == "2"
assert float(r["throughput_lo"]) <= float(r["throughput_hi"])
assert float(r["step_mean_lo_s"]) <= float(r["step_mean_hi_s"])
assert r["revision"] and r["host"] and r["time_utc"].endswith("Z")
float(r["loadavg1"])
EOF

# --- a failing child: named, its status and last stderr line, exit 1
fake broken 1.0 1.0 "$QUIET" 0 fail
"$BIN" $S --against "$T/base" --candidate "$T/broken" --repeat 6 >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 1 ] && ok || ko "failing candidate: exit $rc, want 1"
grep -q "ddpbench: error: --against: the candidate (.*broken) failed in the warm-up run: exit status 7: boom: the last words" "$T/err" &&
    ok || ko "failing candidate: $(cat "$T/err")"

# --- a hung candidate: stopped at its deadline (--timeout), named with its round, exit 1, nothing left
cat >"$T/hang2" <<EOF
#!/bin/sh
echo \$\$ >>"$T/hang2.pids"
exec sleep 100000
EOF
chmod +x "$T/hang2"
t0=$(date +%s)
timeout 60 "$BIN" $S --against "$T/base" --candidate "$T/hang2" --timeout 2 >"$T/out" 2>"$T/err"
rc=$?
t1=$(date +%s)
[ $rc = 1 ] && grep -q "ddpbench: error: --against: the candidate (.*hang2) hung in the warm-up run: still running after 2.0 s (its deadline: --timeout 2 s), stopped and reaped" "$T/err" &&
    [ $((t1 - t0)) -lt 15 ] && ok || ko "hung candidate: exit $rc after $((t1 - t0)) s: $(cat "$T/err")"
for p in $(cat "$T/hang2.pids" 2>/dev/null); do
    kill -0 "$p" 2>/dev/null && [ "$(awk '/^State:/ { print $2 }' /proc/$p/status)" != Z ] &&
        { ko "hung candidate: its process $p is left"; kill "$p"; }
done
# ... without --timeout, the deadline is the base's own warm-up run's (10 x, at least 10 s): a
# candidate that hangs in round 1 after a good warm-up
cat >"$T/hang3" <<EOF
#!/bin/sh
n=\$(cat "$T/count.hang3" 2>/dev/null || echo 0)
echo \$((n + 1)) >"$T/count.hang3"
[ "\$n" -ge 1 ] && exec sleep 100000
exec "$T/same" "\$@"
EOF
chmod +x "$T/hang3"
t0=$(date +%s)
timeout 60 "$BIN" $S --against "$T/base" --candidate "$T/hang3" >"$T/out" 2>"$T/err"
rc=$?
t1=$(date +%s)
[ $rc = 1 ] && grep -q "the candidate (.*hang3) hung in round 1: still running after 10.0 s (its deadline: 10 x the base's warm-up run of [0-9.]* s; --timeout sets it), stopped and reaped" "$T/err" &&
    [ $((t1 - t0)) -lt 25 ] && ok || ko "hung candidate, derived deadline: exit $rc after $((t1 - t0)) s: $(cat "$T/err")"

# --- a candidate that leaves a background child holding its pipes: no round waits for it, none outlives its round
cat >"$T/leaver" <<EOF
#!/bin/sh
(sleep 30 & echo \$! >>"$T/leaver.pids")
(setsid sleep 30 & echo \$! >>"$T/leaver.pids")
exec "$T/same" "\$@"
EOF
chmod +x "$T/leaver"
t0=$(date +%s)
timeout 120 "$BIN" $S --against "$T/base" --candidate "$T/leaver" --repeat 6 >"$T/out" 2>"$T/err"
rc=$?
t1=$(date +%s)
[ $rc = 0 ] && [ $((t1 - t0)) -lt 20 ] && ok || ko "background leftover: exit $rc after $((t1 - t0)) s: $(tail -2 "$T/out") $(cat "$T/err")"
# (a SIGKILLed process dies when the scheduler next runs it: on a busy machine that is not
# at once, so each gets up to 5 s; the leftovers' own sleep is 30 s.  One still there
# after that with SIGKILL pending was killed and runs no more code of its own: the
# gate did its part, and the scheduler's delay is no fault of it.  One without it
# pending is a leftover the gate never killed (one started with setsid is flagged);
# its state is printed.  Once in 6 runs at load 7, niced, a leftover was not gone
# after 5 s, its state unrecorded.)
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '/^State:/ { print $2 }' /proc/$1/status 2>/dev/null)" != Z ]; }
# SIGKILL (signal 9, bit 8: the third hex digit from the right, odd) pending
dying() { awk '/^(SigPnd|ShdPnd):/ { if (index("13579bdfBDF", substr($2, length($2) - 2, 1))) k = 1 } END { exit !k }' /proc/$1/status 2>/dev/null; }
left=""
for p in $(cat "$T/leaver.pids" 2>/dev/null); do
    i=0
    while alive "$p" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if alive "$p"; then
        if dying "$p"; then
            echo "$E2E: leftover $p killed, still dying after 5 s (SIGKILL pending)"
        else
            left="$left $p ($(grep -E '^(State|PPid|SigPnd|ShdPnd)' /proc/$p/status 2>/dev/null | tr '\n\t' '  '), group $(cut -d' ' -f5 /proc/$p/stat 2>/dev/null))"
        fi
    fi
done
[ -z "$left" ] && [ -s "$T/leaver.pids" ] && ok || { ko "background leftovers alive, not killed:$left"; for p in $(cat "$T/leaver.pids"); do kill "$p" 2>/dev/null; done; }

# --- identical builds whose rank 1 exposed communication jumps about: no phase named as a finding
fake cbase 1.0 1.0 "$QUIET"
fake cnoisy 1.0 1.0 "$QUIET" 0 "" "" "0.0035 0.001 0.004 0.0028 0.0008 0.0045 0.0012 0.0031"
"$BIN" $S --against "$T/cbase" --candidate "$T/cnoisy" >"$T/out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "attribution: no phase moved beyond its own noise (the largest, rank 1 comm exposed" "$T/out" &&
    ! grep -q "attribution: rank 1 comm exposed" "$T/out" && ok ||
    ko "attribution within its noise: exit $rc: $(tail -3 "$T/out")"

# --- what describes or writes one run: refused, naming --against (the user gave no --repeat)
expect_error "--against: not with --trace" $S --against "$T/base" --trace "$T/t.json"
expect_error "--against: not with --checkpoint" $S --against "$T/base" --checkpoint "$T/c.ckpt"
expect_error "--against: not with --explain" $S --against "$T/base" --explain
expect_error "--against: not with --report" $S --against "$T/base" --report "$T/r.html"
[ ! -e "$T/r.html" ] && ok || ko "--against --report wrote $T/r.html"

# --- bad inputs: exit 2
expect_error "--against: '$T/none' is not an executable file" $S --against "$T/none"
chmod -x "$T/same"
expect_error "is not an executable file" $S --against "$T/same"
expect_error "--candidate: needs --against" $S --candidate "$T/base"
expect_error "--against: not with --mode compare" --mode compare --against "$T/base"
expect_error "--against: not with --scenario" --scenario straggler --against "$T/base"

# --- Ctrl-C: the child is told and reaped, ddpbench exits 130
cat >"$T/hang" <<EOF
#!/bin/sh
echo \$\$ >"$T/hang.pid"
exec sleep 60
EOF
chmod +x "$T/hang"
# (env --default-signal: a background job of a script starts with SIGINT
# ignored, and ddpbench keeps an ignored SIGINT ignored)
env --default-signal=INT "$BIN" $S --against "$T/hang" --repeat 6 >"$T/out" 2>"$T/err" &
pid=$!
i=0
while [ ! -s "$T/hang.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid
wait $pid
rc=$?
[ $rc = 130 ] && ok || ko "Ctrl-C: exit $rc, want 130: $(cat "$T/err")"
grep -q "stopped: interrupted by SIGINT in the warm-up run (the base's run, stopped and reaped)" "$T/err" &&
    ok || ko "Ctrl-C: $(cat "$T/err")"
child=$(cat "$T/hang.pid")
if kill -0 "$child" 2>/dev/null && [ "$(awk '/^State:/ { print $2 }' /proc/$child/status)" != Z ]; then
    ko "Ctrl-C: the child $child still runs"
    kill "$child"
else
    ok
fi

e2e_finish
