#!/bin/sh
# tests/e2e/e2e_comm.sh: --mode comm, the collective benchmark, on the real
# binary: the nccl-tests tables and --json for every collective, -b/-e/-f as
# the long options, a planted wrong sum caught by the check (exit 1), a dead
# rank, and bad input (exit 2).  Usage: sh tests/e2e/e2e_comm.sh ./ddpbench
E2E=e2e_comm
. "$(dirname "$0")/lib.sh"
e2e_on_exit() { for p in $(leftovers); do kill -KILL "$p" 2>/dev/null; done; }
C="--mode comm --backend cpu -n 3 -w 1"

# The tables: one per collective, every size from -b to -e by -f, no wrong value.
if "$BIN" $C --gpus 0,1,2 -b 8 -e 256K -f 8 >"$T/out" 2>"$T/err"; then
    for coll in all-reduce broadcast reduce-scatter all-gather; do
        grep -q "^# $coll (" "$T/out" && ok || ko "no $coll table: $(cat "$T/out")"
    done
    # all-reduce sizes: 8 64 512 4096 32768 262144 bytes
    n=$(awk '/^# all-reduce/ { on = 1; next } /^# fit/ { on = 0 } on && /^ / { n++ } END { print n }' "$T/out")
    [ "$n" = 6 ] && ok || ko "all-reduce: $n sizes, expected 6"
    grep -q "^# Out of bounds values : 0 OK" "$T/out" && ok || ko "the check: $(tail -3 "$T/out")"
    grep -q "^# Avg bus bandwidth" "$T/out" && ok || ko "no average bus bandwidth"
else
    ko "--mode comm failed: $(cat "$T/err")"
fi

# --json: one object, the short options equal to the long ones, busbw from algbw.
if "$BIN" $C --gpus 0,1 --min-bytes 4K --max-bytes 64K --step-factor 4 --coll all-reduce,reduce \
    --json >"$T/json" 2>"$T/err"; then
    [ "$(wc -l <"$T/json")" = 1 ] && ok || ko "--json: not one line"
    if command -v python3 >/dev/null; then
        python3 - "$T/json" <<'EOF' && ok || ko "--json content: $(head -c 400 "$T/json")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["config"]["mode"] == "comm" and o["config"]["ndevices"] == 2
names = [c["name"] for c in o["collectives"]]
assert names == ["all-reduce", "reduce"], names
ar = o["collectives"][0]
assert [p["bytes"] for p in ar["points"]] == [4096, 16384, 65536]
for p in ar["points"]:
    for place in ("out_of_place", "in_place"):
        q = p[place]
        assert q["wrong"] == 0 and q["time_s"] > 0
        assert abs(q["busbw_gbs"] - q["algbw_gbs"] * ar["bus_factor"]) < 1e-9 * (1 + q["busbw_gbs"])
assert abs(ar["bus_factor"] - 1.0) < 1e-12  # 2(n-1)/n at 2 ranks
assert o["wrong_total"] == 0 and ar["fit"]["alpha_s"] >= 0
EOF
    fi
else
    ko "--json failed: $(cat "$T/err")"
fi

# A planted wrong sum (rank 1, size index 0) is caught: #wrong, FAILED, exit 1.
DDPBENCH_FAULT=sum:1:0 "$BIN" $C --gpus 0,1 -b 1K -e 1K --coll all-reduce >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 1 ] && ok || ko "planted wrong sum: exit $rc, expected 1"
grep -q "wrong value" "$T/err" && ok || ko "planted wrong sum: $(cat "$T/err")"
grep -q "Out of bounds values : [1-9][0-9]* FAILED" "$T/out" && ok || ko "no FAILED line: $(cat "$T/out")"

# A rank that dies mid-sweep: the supervisor names it, exit 1, nobody left behind.
DDPBENCH_E2E_TAG=$TAG DDPBENCH_FAULT=kill:1:1 "$BIN" $C --gpus 0,1 -b 1K -e 64K >/dev/null 2>"$T/err"
rc=$?
[ $rc = 1 ] && ok || ko "a killed rank: exit $rc, expected 1"
grep -q "rank 1 (device 1) killed by signal 9" "$T/err" && ok || ko "a killed rank: $(cat "$T/err")"
left=$(lingering)
[ -z "$left" ] && ok || ko "processes left behind: $left"

# Bad input: one line, exit 2, before anything runs.
expect_error "--min-bytes" $C -b 1x
expect_error "more than --max-bytes" $C -b 64M -e 1M
expect_error "--coll: unknown collective 'foo'" $C --coll foo
expect_error "-b (--min-bytes): needs a value" --mode comm -b
expect_error "not for --mode comm" $C --csv
expect_error "--comm nccl" $C --comm nccl
e2e_finish
