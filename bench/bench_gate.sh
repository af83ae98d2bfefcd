#!/bin/sh
# bench/bench_gate.sh: the regression gates measured as rates, on this machine
# as it is (busy or not: that is the point).  mlp-small, --backend cpu, in
# single and ddp (2 ranks):
#   ab-same   the A/B gate with the same build on both sides (two copies of
#             one binary): every "regressed" is a false alarm
#   ab-slow   the A/B gate against a candidate planted 10% slower: ddp, a
#             wrapper adding --slow-rank 1:1.1 (rank 1 computes 10% more each
#             step; needs the fractional --slow-rank); single, a wrapper that
#             trains a 10% larger batch (--batch 282 for 256: every GEMM has
#             10% more rows); every "regressed" is a catch
#   stored    the stored-baseline gate, unchanged: --repeat 5 --json written
#             once per mode, then --repeat 5 --baseline (a false alarm each
#             "regressed")
# The kinds are interleaved try by try, so a busy hour falls on all of them.
# Each try is one line of tries.jsonl (kind, mode, verdict, exit status,
# seconds, load before and after, the interval); summary.txt counts them.
#
# usage: sh bench/bench_gate.sh [-b BIN] [-n TRIES] [-c CATCHES] [-o DIR] [-k KINDS] [-S]
#   -b BIN      ddpbench [./ddpbench] (copied: a rebuild during the run does not touch it)
#   -n TRIES    unchanged tries per mode and gate [30]
#   -c CATCHES  planted-slowdown tries per mode [10]
#   -o DIR      results [bench/results/gate]
#   -k KINDS    which kinds ["ab-same ab-slow stored"]
#   -S          only summarise DIR/tries.jsonl (of a run cut short)
set -u
BIN=./ddpbench
TRIES=30
CATCHES=10
OUT=bench/results/gate
KINDS="ab-same ab-slow stored"
SUMMARY_ONLY=no
while getopts b:n:c:o:k:S opt; do
    case $opt in
    b) BIN=$OPTARG ;;
    n) TRIES=$OPTARG ;;
    c) CATCHES=$OPTARG ;;
    o) OUT=$OPTARG ;;
    k) KINDS=$OPTARG ;;
    S) SUMMARY_ONLY=yes ;;
    *) exit 2 ;;
    esac
done
mkdir -p "$OUT"
TRIESF="$OUT/tries.jsonl"
summarise() { # what fractional --slow-rank said
python3 - "$TRIESF" "$1" >"$OUT/summary.txt" <<'EOF'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("bench_gate: %d tries; fractional --slow-rank: %s" % (len(rows), sys.argv[2]))
for kind in ["ab-same", "ab-slow", "stored"]:
    for mode in ["single", "ddp"]:
        rs = [r for r in rows if r["kind"] == kind and r["mode"] == mode]
        if not rs:
            continue
        v = {}
        for r in rs:
            v[r["verdict"]] = v.get(r["verdict"], 0) + 1
        secs = [r["seconds"] for r in rs]
        loads = [r["load_before"] for r in rs] + [r["load_after"] for r in rs]
        line = "%-8s %-6s %2d tries: %s; seconds median %.0f (max %.0f); load %.1f..%.1f (median %.1f)" % (
            kind, mode, len(rs), ", ".join("%s %d" % kv for kv in sorted(v.items())),
            st.median(secs), max(secs), min(loads), max(loads), st.median(loads))
        if kind.startswith("ab"):
            rat = [r["ratio"] for r in rs if r.get("ratio")]
            wid = [r["hi"] / r["lo"] - 1 for r in rs if r.get("lo") and r.get("hi")]
            if rat:
                line += "; ratio median %.3f (%.3f..%.3f), interval width median %.1f%%" % (
                    st.median(rat), min(rat), max(rat), 100 * st.median(wid) if wid else float("nan"))
            nr = [r["rounds"] for r in rs if r.get("rounds")]
            if nr:
                line += "; rounds median %d (max %d)" % (st.median(nr), max(nr))
            if any(r.get("straggler") is not None for r in rs):
                line += "; straggler named %d" % sum(1 for r in rs if r.get("straggler") is not None)
        print(line)
EOF
}
if [ $SUMMARY_ONLY = yes ]; then
    summarise "(not checked: -S)"
    cat "$OUT/summary.txt"
    exit 0
fi
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
COMMON="--model mlp-small --backend cpu --steps 64"
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
slow_ok=yes
"$W/cand/ddpbench" $(opts ddp) --steps 3 --slow-rank 1:1.1 --quiet >/dev/null 2>"$W/err" ||
    slow_ok="no ($(cat "$W/err"))"

load() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
: >"$TRIESF"

# one try: kind mode try; a line into tries.jsonl
try() {
    kind=$1 mode=$2 n=$3
    l0=$(load)
    t0=$(now)
    case $kind in
    ab-same)
        "$W/cand/ddpbench" $(opts "$mode") --against "$W/base/ddpbench" --candidate "$W/cand/ddpbench" \
            --json >"$W/out.json" 2>"$W/err"
        rc=$?
        ;;
    ab-slow)
        "$W/cand/ddpbench" $(opts "$mode") --against "$W/base/ddpbench" --candidate "$W/slow_$mode" \
            --json >"$W/out.json" 2>"$W/err"
        rc=$?
        ;;
    stored)
        "$W/cand/ddpbench" $(opts "$mode") --repeat 5 --baseline "$W/stored_$mode.json" --tolerance 5 \
            --json >"$W/out.json" 2>"$W/err"
        rc=$?
        ;;
    esac
    t1=$(now)
    l1=$(load)
    python3 - "$kind" "$mode" "$n" "$rc" "$t0" "$t1" "$l0" "$l1" "$W/out.json" "$W/err" >>"$TRIESF" <<'EOF'
import json, sys
kind, mode, n, rc, t0, t1, l0, l1, out, err = sys.argv[1:]
rc = int(rc)
rec = {"kind": kind, "mode": mode, "try": int(n), "exit": rc, "seconds": round(float(t1) - float(t0), 1),
       "load_before": float(l0), "load_after": float(l1)}
errtxt = open(err).read().strip().splitlines()
try:
    o = json.loads(open(out).read().strip().splitlines()[-1])
except Exception:
    o = None
if kind.startswith("ab") and o:
    ab = o["ab"]
    e = ab["estimate"]
    w = ab.get("wall") or {}
    rec.update(figure=ab.get("figure"), rounds=e["rounds"], wall_ratio=w.get("ratio"), wall_lo=w.get("lo"),
               wall_hi=w.get("hi"), wall_judged=ab.get("wall_judged"), work_by_device=ab.get("work_ratio_by_device"))
    rec.update(verdict=ab["verdict"], ratio=e["ratio"], lo=e["lo"], hi=e["hi"], hl=ab["hodges_lehmann"]["ratio"],
               rounds_to_settle=ab["rounds_to_settle"], lopsided_rounds=ab["lopsided_rounds"],
               both_disturbed_rounds=ab["both_disturbed_rounds"], reason=ab["reason"],
               contention=[[(r[k].get("machine") or {}).get("contention") for k in ("base", "candidate")]
                           for r in o["rounds"] if r["used"]],
               ratios=[round(r["ratio"], 4) for r in o["rounds"] if r["used"]],
               loads=[r["base"]["environment"].get("loadavg", "").split(" ")[0] for r in o["rounds"] if r["used"]],
               straggler=ab["straggler"])
else:
    rec["verdict"] = {0: "pass", 3: "regressed", 4: "no verdict"}.get(rc, "error")
    if o and o.get("repeat"):
        t = o["repeat"].get("throughput_samples_per_s", {})
        rec.update(median=t.get("median"), lo=t.get("lo"), hi=t.get("hi"))
if errtxt and rc != 0:
    rec["last_line"] = [l for l in errtxt if "verdict" in l or "error" in l or "regress" in l][-3:] or errtxt[-2:]
print(json.dumps(rec))
EOF
    tail -1 "$TRIESF" | cut -c1-200
}

echo "bench_gate: $(date -u +%FT%TZ), $(nproc) CPUs, load $(cat /proc/loadavg), fractional --slow-rank: $slow_ok" |
    tee "$OUT/started.txt"
for mode in single ddp; do
    case " $KINDS " in *" stored "*)
        "$W/base/ddpbench" $(opts "$mode") --repeat 5 --json >"$W/stored_$mode.json" 2>"$W/err" ||
            echo "stored baseline for $mode: $(tail -1 "$W/err")"
        ;;
    esac
done
i=1
while [ $i -le "$TRIES" ]; do
    for mode in single ddp; do
        for kind in $KINDS; do
            [ "$kind" = ab-slow ] && [ $i -gt "$CATCHES" ] && continue
            [ "$kind" = ab-slow ] && [ "$mode" = ddp ] && [ "$slow_ok" != yes ] && continue
            try "$kind" "$mode" $i
        done
    done
    i=$((i + 1))
done

summarise "$slow_ok"
cat "$OUT/summary.txt"
