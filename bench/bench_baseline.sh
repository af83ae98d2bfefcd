#!/bin/sh
# bench/bench_baseline.sh: the stored-baseline gate (--baseline) measured as
# rates on this machine as it is.  Three baselines of one build are written
# (--repeat R --json): quiet, beside one busy loop, beside two.  Then:
#   same   N tries of the same build (--repeat R --baseline), round-robin
#          over the three baselines and over 0, 1 and 2 busy loops planted
#          beside the try: every "regressed" and every "improved" is a false
#          alarm (the goal: none in 30 at load 2-8)
#   slow   C tries of the same build planted 15% slower, against the quiet
#          baseline, nothing planted beside them: ddp, rank 1 computing 15%
#          more each step
#          (--slow-rank 1:1.15, a setting the baseline only warns about, as
#          bench/bench_gate.sh plants it); single, 15% more rows can not be
#          planted (another --batch is another configuration), so single
#          has no slow kind: every "regressed" is a catch (the goal: 8 of 10
#          at load <= 3)
# Each try is a line of DIR/tries.jsonl (kind, baseline, loops, verdict,
# exit status, the work ratio the verdict gave, the loads); DIR/summary.txt
# counts them.
# usage: sh bench/bench_baseline.sh [-b BIN] [-m MODE] [-n N] [-c C] [-r R] [-o DIR] [-S]
#   -b BIN   the build [./ddpbench]      -m MODE  ddp or single [ddp]
#   -n N     unchanged tries [30]        -c C     planted tries [10]
#   -r R     --repeat of every run [5]   -o DIR   results [bench/results/baseline-MODE]
#   -S       only summarise DIR/tries.jsonl
set -u
BIN=./ddpbench MODE=ddp N=30 C=10 R=5 OUT="" SUMMARY_ONLY=no
while getopts b:m:n:c:r:o:S opt; do
    case $opt in
    b) BIN=$OPTARG ;; m) MODE=$OPTARG ;; n) N=$OPTARG ;; c) C=$OPTARG ;; r) R=$OPTARG ;;
    o) OUT=$OPTARG ;; S) SUMMARY_ONLY=yes ;; *) exit 2 ;;
    esac
done
[ -n "$OUT" ] || OUT=bench/results/baseline-$MODE
mkdir -p "$OUT"
TRIESF="$OUT/tries.jsonl"
summarise() {
python3 - "$TRIESF" <<'EOF' | tee "$OUT/summary.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for kind in ("same", "slow"):
    rs = [r for r in rows if r["kind"] == kind]
    if not rs:
        continue
    v = {}
    for r in rs:
        v[r["verdict"]] = v.get(r["verdict"], 0) + 1
    loads = [r["load_before"] for r in rs] + [r["load_after"] for r in rs]
    print("%s: %d tries: %s; load %.1f..%.1f" % (kind, len(rs), ", ".join("%s %d" % kv for kv in sorted(v.items())),
          min(loads), max(loads)))
    for b in ("quiet", "loop1", "loop2"):
        bs = [r for r in rs if r["baseline"] == b]
        if bs:
            print("  against the %s baseline: %s" % (b, ", ".join("%s %s (work %s, loops %d, load %.1f)" % (
                r["verdict"], r["exit"], "%+.1f%%" % r["work_pct"] if r.get("work_pct") is not None else "-",
                r["loops"], r["load_before"]) for r in bs)))
same = [r for r in rows if r["kind"] == "same"]
slow = [r for r in rows if r["kind"] == "slow"]
low = [r for r in slow if max(r["load_before"], r["load_after"]) <= 3.0]
print("goals: unchanged %d regressed, %d improved in %d (goal 0 and 0 in 30 or more); planted 15%%: %d/%d caught at load <= 3 (goal >= 8/10), %d/%d at any load"
      % (sum(r["verdict"] == "regressed" for r in same), sum(r["verdict"] == "improved" for r in same), len(same),
         sum(r["verdict"] == "regressed" for r in low), len(low), sum(r["verdict"] == "regressed" for r in slow), len(slow)))
EOF
}
if [ $SUMMARY_ONLY = yes ]; then summarise; exit 0; fi
W=$(mktemp -d)
LOOPS=""
unplant() { for p in $LOOPS; do kill "$p" 2>/dev/null; done; LOOPS=""; }
plant() { unplant; k=0; while [ "$k" -lt "$1" ]; do sh -c 'while :; do :; done' & LOOPS="$LOOPS $!"; k=$((k + 1)); done; }
trap 'unplant; rm -rf "$W"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cp "$BIN" "$W/ddpbench"
[ -f "$(dirname "$BIN")/libddpbench-cuda.so" ] && cp "$(dirname "$BIN")/libddpbench-cuda.so" "$W/"
if [ "$MODE" = ddp ]; then OPTS="--mode ddp --gpus 0,1"; else OPTS="--mode single"; C=0; fi
OPTS="$OPTS --model mlp-small --backend cpu --repeat $R --tolerance 5"
load() { cut -d' ' -f1 /proc/loadavg; }
echo "bench_baseline: $(date -u +%FT%TZ), $MODE, --repeat $R, load $(cat /proc/loadavg)" | tee "$OUT/started.txt"
n=0
for b in quiet loop1 loop2; do
    plant $n
    # shellcheck disable=SC2086 # the options are meant to split
    "$W/ddpbench" $OPTS --json >"$OUT/$b.json" 2>"$OUT/$b.err" || { echo "baseline $b: $(tail -1 "$OUT/$b.err")"; exit 1; }
    unplant
    echo "baseline $b ($n loops): $(grep -c . "$OUT/$b.json") run(s); $(grep -m1 'warning' "$OUT/$b.err" | cut -c1-160)"
    n=$((n + 1))
done
: >"$TRIESF"
try() { # kind baseline loops extra
    kind=$1 base=$2 loops=$3
    shift 3
    plant "$loops"
    l0=$(load)
    # shellcheck disable=SC2086
    "$W/ddpbench" $OPTS --baseline "$OUT/$base.json" "$@" >"$W/out" 2>&1
    rc=$?
    l1=$(load)
    unplant
    python3 - "$kind" "$base" "$loops" "$rc" "$l0" "$l1" "$W/out" >>"$TRIESF" <<'EOF'
import json, re, sys
kind, base, loops, rc, l0, l1, out = sys.argv[1:]
text = open(out).read()
v = re.search(r"^verdict: ([a-z ]+?)(:|$)", text, re.M)
w = re.search(r"work per step \(CPU seconds, p10\) ([-+][0-9.]+)%", text)
print(json.dumps({"kind": kind, "baseline": base, "loops": int(loops), "exit": int(rc),
                  "verdict": v.group(1) if v else "error", "work_pct": float(w.group(1)) if w else None,
                  "load_before": float(l0), "load_after": float(l1),
                  "line": next((l for l in text.splitlines() if l.startswith("verdict: ")), text.strip()[-200:])}))
EOF
    tail -1 "$TRIESF" | cut -c1-220
}
i=0
while [ "$i" -lt "$N" ] || [ "$i" -lt "$C" ]; do
    set -- quiet loop1 loop2
    shift $((i % 3))
    base=$1
    [ "$i" -lt "$N" ] && try same "$base" $(((i / 3) % 3))
    [ "$i" -lt "$C" ] && try slow quiet 0 --slow-rank 1:1.15
    i=$((i + 1))
done
summarise
