#!/bin/sh
# bench/bench_gate.sh: the regression gates measured as rates, on this machine
# as it is (busy or not: that is the point).  mlp-small, --backend cpu, in
# single and ddp (2 ranks):
#   ab-same   the A/B gate with the same build on both sides (two copies of
#             one binary): every "regressed" is a false alarm, every "no
#             change" the right answer
#   ab-slow   the A/B gate against a candidate planted 10% slower: ddp, a
#             wrapper adding --slow-rank 1:1.1 (rank 1 computes 10% more each
#             step); single, a wrapper that trains 10% more rows (--batch 282
#             for 256: every GEMM has 10% more rows); every "regressed" is a
#             catch
#   stored    the stored-baseline gate, unchanged: --repeat 5 --json written
#             once per mode, then --repeat 5 --baseline (a false alarm each
#             "regressed")
# Each gate under test (-G: "after", this build; "before", an older build
# given with -B) judges the same children: copies of the child build (-C,
# default this build), so only the gate's own rule differs between them.
# With -H two busy loops (one per core of a 2-core machine) run through
# every try: the "beside two busy loops" case.  The kinds, modes and gates
# are interleaved try by try, so a busy hour falls on all of them.  Each try
# is one line of tries.jsonl (gate, kind, mode, busy, verdict, exit status,
# seconds, rounds, why it stopped, the loads); summary.txt counts them and
# checks issue 36's goals.
#
# usage: sh bench/bench_gate.sh [-b BIN] [-B OLD] [-C CHILD] [-G "after before"] [-n TRIES]
#                               [-c CATCHES] [-k KINDS] [-m MODES] [-H] [-o DIR] [-S]
#   -b BIN      this build's ddpbench, the "after" gate [./ddpbench]
#   -B OLD      an older build's ddpbench, the "before" gate (needed when -G names it)
#   -C CHILD    the build both sides of every gate run [BIN]
#   -G GATES    which gates ["after", or "after before" with -B]
#   -n TRIES    unchanged tries per mode, gate and kind [30]
#   -c CATCHES  planted-slowdown tries per mode and gate [10]
#   -k KINDS    ["ab-same ab-slow stored"]
#   -m MODES    ["single ddp"]
#   -H          two busy loops beside every try
#   -o DIR      results [bench/results/gate, or bench/results/gate-busy with -H]
#   -S          only summarise DIR/tries.jsonl (of a run cut short)
# (The binaries are copied first: a rebuild during the run touches none.)
set -u
BIN=./ddpbench
OLD=""
CHILD=""
GATES=""
TRIES=30
CATCHES=10
KINDS="ab-same ab-slow stored"
MODES="single ddp"
BUSY=no
OUT=""
SUMMARY_ONLY=no
while getopts b:B:C:G:n:c:k:m:Ho:S opt; do
    case $opt in
    b) BIN=$OPTARG ;;
    B) OLD=$OPTARG ;;
    C) CHILD=$OPTARG ;;
    G) GATES=$OPTARG ;;
    n) TRIES=$OPTARG ;;
    c) CATCHES=$OPTARG ;;
    k) KINDS=$OPTARG ;;
    m) MODES=$OPTARG ;;
    H) BUSY=yes ;;
    o) OUT=$OPTARG ;;
    S) SUMMARY_ONLY=yes ;;
    *) exit 2 ;;
    esac
done
[ -n "$OUT" ] || { [ $BUSY = yes ] && OUT=bench/results/gate-busy || OUT=bench/results/gate; }
[ -n "$CHILD" ] || CHILD=$BIN
[ -n "$GATES" ] || { [ -n "$OLD" ] && GATES="after before" || GATES=after; }
case " $GATES " in *" before "*) [ -n "$OLD" ] || { echo "bench_gate: -G before needs -B OLD" >&2; exit 2; } ;; esac
mkdir -p "$OUT"
TRIESF="$OUT/tries.jsonl"
summarise() {
python3 - "$TRIESF" >"$OUT/summary.txt" <<'EOF'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("bench_gate: %d tries" % len(rows))
for gate in ["after", "before"]:
    for busy in [False, True]:
        for kind in ["ab-same", "ab-slow", "stored"]:
            for mode in ["single", "ddp"]:
                rs = [r for r in rows if r["gate"] == gate and r["busy"] == busy and r["kind"] == kind and r["mode"] == mode]
                if not rs:
                    continue
                v = {}
                for r in rs:
                    v[r["verdict"]] = v.get(r["verdict"], 0) + 1
                secs = [r["seconds"] for r in rs]
                loads = [r["load_before"] for r in rs] + [r["load_after"] for r in rs]
                over = sum(1 for r in rs if r.get("budget_s") and r["seconds"] > r["budget_s"])
                line = "%-6s %-5s %-8s %-6s %2d tries: %s; seconds median %.0f (max %.0f, %d over the budget); load %.1f..%.1f (median %.1f)" % (
                    gate, "busy" if busy else "", kind, mode, len(rs), ", ".join("%s %d" % kv for kv in sorted(v.items())),
                    st.median(secs), max(secs), over, min(loads), max(loads), st.median(loads))
                if kind.startswith("ab"):
                    rat = [r["ratio"] for r in rs if r.get("ratio")]
                    nr = [r["rounds"] for r in rs if r.get("rounds")]
                    if rat:
                        line += "; ratio median %.3f (%.3f..%.3f)" % (st.median(rat), min(rat), max(rat))
                    if nr:
                        line += "; rounds median %d (max %d)" % (st.median(nr), max(nr))
                    stops = {}
                    for r in rs:
                        if r.get("stopped"):
                            stops[r["stopped"]] = stops.get(r["stopped"], 0) + 1
                    if stops:
                        line += "; stopped: " + ", ".join("%s %d" % kv for kv in sorted(stops.items()))
                    if any(r.get("straggler") is not None for r in rs):
                        line += "; straggler named %d" % sum(1 for r in rs if r.get("straggler") is not None)
                print(line)
# issue 36's goals, for the A/B gate, per gate
print()
for gate in ["after", "before"]:
    for mode in ["single", "ddp"]:
        def sel(kind, busy):
            return [r for r in rows if r["gate"] == gate and r["mode"] == mode and r["kind"] == kind and r["busy"] == busy]
        same, busy, slow = sel("ab-same", False), sel("ab-same", True), sel("ab-slow", False) + sel("ab-slow", True)
        if not (same or busy or slow):
            continue
        out = []
        if same:
            out.append("unchanged: %d regressed (goal 0), %d/%d no change (goal >= 90%%), load median %.1f" % (
                sum(r["verdict"] == "regressed" for r in same), sum(r["verdict"] == "no change" for r in same), len(same),
                st.median([r["load_before"] for r in same])))
        if busy:
            out.append("beside two busy loops: %d regressed (goal 0), %d/%d decided (goal >= 2/3)" % (
                sum(r["verdict"] == "regressed" for r in busy),
                sum(r["verdict"] in ("no change", "improved", "regressed") for r in busy), len(busy)))
        if slow:
            out.append("10%% slower: %d/%d caught (goal >= 9/10)" % (sum(r["verdict"] == "regressed" for r in slow), len(slow)))
        ab = same + busy + slow
        if ab:
            out.append("a try: median %.0f s (goal <= 45), %d over the budget (goal 0)" % (
                st.median([r["seconds"] for r in ab]), sum(1 for r in ab if r.get("budget_s") and r["seconds"] > r["budget_s"])))
        print("goals, %s gate, %s: %s" % (gate, mode, "; ".join(out)))
EOF
}
if [ $SUMMARY_ONLY = yes ]; then
    summarise
    cat "$OUT/summary.txt"
    exit 0
fi
W=$(mktemp -d)
HOGS=""
cleanup() {
    for p in $HOGS; do kill "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$W/base" "$W/cand" "$W/after" "$W/before"
cp "$CHILD" "$W/base/ddpbench"
cp "$CHILD" "$W/cand/ddpbench"
cp "$BIN" "$W/after/ddpbench"
[ -n "$OLD" ] && cp "$OLD" "$W/before/ddpbench"
for b in "$CHILD:base" "$CHILD:cand" "$BIN:after" "$OLD:before"; do
    src=${b%%:*} dst=${b##*:}
    [ -n "$src" ] && [ -f "$(dirname "$src")/libddpbench-cuda.so" ] && cp "$(dirname "$src")/libddpbench-cuda.so" "$W/$dst/"
done
COMMON="--model mlp-small --backend cpu"
opts() { # mode
    if [ "$1" = ddp ]; then echo "$COMMON --mode ddp --gpus 0,1"; else echo "$COMMON --mode single"; fi
}
cat >"$W/slow_ddp" <<EOF
#!/bin/sh
exec "$W/cand/ddpbench" "\$@" --slow-rank 1:1.1
EOF
cat >"$W/slow_single" <<EOF
#!/bin/sh
exec "$W/cand/ddpbench" "\$@" --batch 282
EOF
chmod +x "$W/slow_ddp" "$W/slow_single"
load() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
: >"$TRIESF"

# one try: gate kind mode try; a line into tries.jsonl
try() {
    gate=$1 kind=$2 mode=$3 n=$4
    G="$W/$gate/ddpbench"
    l0=$(load)
    t0=$(now)
    case $kind in
    ab-same)
        "$G" $(opts "$mode") --against "$W/base/ddpbench" --candidate "$W/cand/ddpbench" \
            --json >"$W/out.json" 2>"$W/err"
        rc=$?
        ;;
    ab-slow)
        "$G" $(opts "$mode") --against "$W/base/ddpbench" --candidate "$W/slow_$mode" \
            --json >"$W/out.json" 2>"$W/err"
        rc=$?
        ;;
    stored)
        "$G" $(opts "$mode") --repeat 5 --baseline "$W/stored_$mode.json" --tolerance 5 \
            --json >"$W/out.json" 2>"$W/err"
        rc=$?
        ;;
    esac
    t1=$(now)
    l1=$(load)
    python3 - "$gate" "$kind" "$mode" "$n" "$rc" "$t0" "$t1" "$l0" "$l1" "$BUSY" "$W/out.json" "$W/err" >>"$TRIESF" <<'EOF'
import json, sys
gate, kind, mode, n, rc, t0, t1, l0, l1, busy, out, err = sys.argv[1:]
rc = int(rc)
rec = {"gate": gate, "kind": kind, "mode": mode, "try": int(n), "busy": busy == "yes", "exit": rc,
       "seconds": round(float(t1) - float(t0), 1), "load_before": float(l0), "load_after": float(l1)}
errtxt = open(err).read().strip().splitlines()
try:
    o = json.loads(open(out).read().strip().splitlines()[-1])
except Exception:
    o = None
if kind.startswith("ab") and o and "ab" in o:
    ab = o["ab"]
    e = ab["estimate"]
    rec.update(verdict=ab["verdict"], ratio=e["ratio"], lo=e["lo"], hi=e["hi"], rounds=e["rounds"],
               stopped=ab.get("stopped"), budget_s=ab.get("budget_s"), figure=ab.get("figure"),
               retaken=ab.get("retaken"),
               lopsided_rounds=ab["lopsided_rounds"], both_disturbed_rounds=ab["both_disturbed_rounds"],
               reason=ab["reason"], straggler=ab["straggler"],
               ratios=[round(r["ratio"], 4) for r in o["rounds"] if r["used"]],
               loads=[r["base"]["environment"].get("loadavg", "").split(" ")[0] for r in o["rounds"] if r["used"]])
else:
    rec["verdict"] = {0: "no change", 3: "regressed", 4: "no verdict"}.get(rc, "error")
    for l in errtxt:  # the stored gate's own word, when it printed one
        if l.startswith("verdict: "):
            rec["verdict"] = l.split(":")[1].strip()
if errtxt and rc not in (0, 3, 4):
    rec["last_line"] = errtxt[-2:]
print(json.dumps(rec))
EOF
    tail -1 "$TRIESF" | cut -c1-200
}

echo "bench_gate: $(date -u +%FT%TZ), $(nproc) CPUs, load $(cat /proc/loadavg), gates: $GATES, busy loops: $BUSY" |
    tee "$OUT/started.txt"
if [ $BUSY = yes ]; then
    for i in 1 2; do
        sh -c 'while :; do :; done' &
        HOGS="$HOGS $!"
    done
fi
case " $KINDS " in *" stored "*)
    for mode in $MODES; do
        "$W/base/ddpbench" $(opts "$mode") --repeat 5 --json >"$W/stored_$mode.json" 2>"$W/err" ||
            echo "stored baseline for $mode: $(tail -1 "$W/err")"
    done
    ;;
esac
i=1
while [ $i -le "$TRIES" ]; do
    for mode in $MODES; do
        for kind in $KINDS; do
            [ "$kind" = ab-slow ] && [ $i -gt "$CATCHES" ] && continue
            for gate in $GATES; do
                try "$gate" "$kind" "$mode" $i
            done
        done
    done
    i=$((i + 1))
done

summarise
cat "$OUT/summary.txt"
