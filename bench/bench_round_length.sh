#!/bin/sh
# bench/bench_round_length.sh: which child-run length makes the A/B gate
# decide fastest on this machine.  A shorter run (fewer --steps) costs less
# time a round, so more rounds fit the budget, but its figure is noisier and
# part of its time is the fixed cost of a run (start, data, init, warm-up
# steps), which does not shrink.  For each length and mode (mlp-small, CPU,
# single and ddp on 2 devices) it runs the gate on two copies of one build
# (unchanged: the answer is "no change") TRIES times and records, from the
# gate's own --json:
#   - seconds a try, the verdict, the rounds;
#   - each child's wall time: their median by length gives the fixed cost
#     (the intercept of a line through wall time against steps) and the
#     cost of a step (its slope);
#   - the spread of the judged log-ratios (1.4826 x MAD).
# summary.txt: per mode and length, the median seconds to a verdict, how
# many decided, the median rounds, the child's median wall time, the spread,
# and the fitted fixed cost and step cost; the fastest length that decided
# every try is named.
#
# usage: sh bench/bench_round_length.sh [-b BIN] [-n TRIES] [-s "8 16 32 64"] [-m "single ddp"] [-o DIR]
set -u
BIN=./ddpbench
TRIES=3
LENGTHS="8 16 32 64"
MODES="single ddp"
OUT=bench/results/round_length
while getopts b:n:s:m:o: opt; do
    case $opt in
    b) BIN=$OPTARG ;;
    n) TRIES=$OPTARG ;;
    s) LENGTHS=$OPTARG ;;
    m) MODES=$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) exit 2 ;;
    esac
done
mkdir -p "$OUT"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$W/base" "$W/cand"
cp "$BIN" "$W/base/ddpbench"
cp "$BIN" "$W/cand/ddpbench"
for lib in "$(dirname "$BIN")"/libddpbench-cuda.so; do
    [ -f "$lib" ] && cp "$lib" "$W/base/" && cp "$lib" "$W/cand/"
done
opts() { # mode
    if [ "$1" = ddp ]; then echo "--model mlp-small --backend cpu --mode ddp --gpus 0,1"; else echo "--model mlp-small --backend cpu --mode single"; fi
}
TRIESF="$OUT/tries.jsonl"
: >"$TRIESF"
echo "bench_round_length: $(date -u +%FT%TZ), $(nproc) CPUs, load $(cat /proc/loadavg), lengths $LENGTHS, $TRIES tries" |
    tee "$OUT/started.txt"
i=1
while [ $i -le "$TRIES" ]; do
    for mode in $MODES; do
        for s in $LENGTHS; do # interleaved: a busy minute falls on every length
            l0=$(cut -d' ' -f1 /proc/loadavg)
            t0=$(date +%s.%N)
            "$W/cand/ddpbench" $(opts "$mode") --steps "$s" --against "$W/base/ddpbench" \
                --candidate "$W/cand/ddpbench" --json >"$W/out.json" 2>"$W/err"
            rc=$?
            t1=$(date +%s.%N)
            l1=$(cut -d' ' -f1 /proc/loadavg)
            python3 - "$mode" "$s" "$i" "$rc" "$t0" "$t1" "$l0" "$l1" "$W/out.json" >>"$TRIESF" <<'EOF'
import json, sys, statistics as st
mode, s, i, rc, t0, t1, l0, l1, out = sys.argv[1:]
rec = {"mode": mode, "steps": int(s), "try": int(i), "exit": int(rc),
       "seconds": round(float(t1) - float(t0), 1), "load_before": float(l0), "load_after": float(l1)}
try:
    o = json.loads(open(out).read().strip().splitlines()[-1])
    ab = o["ab"]
    rec.update(verdict=ab["verdict"], rounds=ab["rounds"], stopped=ab["stopped"],
               walls=[round(r[k + "_wall_s"], 3) for r in o["rounds"] for k in ("base", "candidate")],
               ratios=[round(r["ratio"], 5) for r in o["rounds"] if r["used"]])
except Exception as e:
    rec["verdict"] = "error: %s" % e
print(json.dumps(rec))
EOF
            tail -1 "$TRIESF" | cut -c1-160
        done
    done
    i=$((i + 1))
done
python3 - "$TRIESF" >"$OUT/summary.txt" <<'EOF'
import json, math, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("bench_round_length: %d tries" % len(rows))
for mode in sorted({r["mode"] for r in rows}):
    rs = [r for r in rows if r["mode"] == mode]
    pts, best = [], None
    for s in sorted({r["steps"] for r in rs}):
        g = [r for r in rs if r["steps"] == s]
        walls = [w for r in g for w in r.get("walls", [])]
        d = [math.log(x) for r in g for x in r.get("ratios", [])]
        spread = 1.4826 * st.median([abs(x - st.median(d)) for x in d]) if d else float("nan")
        decided = sum(1 for r in g if r.get("stopped") == "decided")
        secs = st.median([r["seconds"] for r in g])
        loads = [r["load_before"] for r in g] + [r["load_after"] for r in g]
        wall = st.median(walls) if walls else float("nan")
        pts.append((s, wall))
        print("%-6s steps %3d: %d tries, decided %d (%s), seconds median %.0f (%.0f..%.0f), rounds median %s, "
              "child wall median %.2f s, spread of log-ratios %.4f, load %.1f..%.1f" % (
                  mode, s, len(g), decided, ", ".join(sorted({r.get("verdict", "?") for r in g})), secs,
                  min(r["seconds"] for r in g), max(r["seconds"] for r in g),
                  st.median([r.get("rounds", 0) for r in g]), wall, spread, min(loads), max(loads)))
        if decided == len(g) and (best is None or secs < best[1]):
            best = (s, secs)
    if len(pts) >= 2:
        n = len(pts)
        mx = sum(p[0] for p in pts) / n
        my = sum(p[1] for p in pts) / n
        b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sum((p[0] - mx) ** 2 for p in pts)
        print("%-6s a child run: %.2f s fixed (start, data, init, warm-up steps) + %.1f ms a step" % (
            mode, my - b * mx, 1e3 * b))
    print("%-6s fastest to decide every try: %s" % (mode, "--steps %d (%.0f s median)" % best if best else "none"))
EOF
cat "$OUT/summary.txt"
