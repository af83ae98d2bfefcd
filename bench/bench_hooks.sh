#!/bin/sh
# bench/bench_hooks.sh: what DDP's communication hooks cost and save, on this
# machine as it is: mlp-medium (1024-2048-2048-1024, 8.4 M parameters),
# --backend cpu, 2 and 4 ranks, each hook (fp16, bf16, powersgd:4) against
# plain DDP:
#   bytes   each rank's bytes per step (the buckets' collectives, --json's
#           comm_hook.bytes_per_step) against plain DDP's 4 bytes a parameter
#   step    the median step time, over ROUNDS interleaved rounds (each round
#           runs every hook once, in an order that rotates round by round, so
#           a busy minute falls on all of them); the figure is the median
#           over rounds of each run's p50, with the rounds' min and max
#   drift   the final parameters' relative distance from the plain DDP run
#           made first in the same invocation (--comm-hook does it), and the
#           loss at the last step of both
#   load    the load average at each run's start and end, and ddpbench's own
#           verdict on whether the machine disturbed it (machine.disturbed)
# PowerSGD is timed on its compressed steps: --warmup-steps equals its START.
# Each run is one line of runs.jsonl; summary.md is the table docs/benchmarks.md
# quotes.
#
# usage: sh bench/bench_hooks.sh [-b BIN] [-r ROUNDS] [-s STEPS] [-w WORLDS] [-o DIR]
#   -b BIN      ddpbench [./ddpbench] (copied: a rebuild during the run does not touch it)
#   -r ROUNDS   interleaved rounds [3]
#   -s STEPS    steps per run, of which START (10) untimed [30]
#   -w WORLDS   rank counts ["2 4"]
#   -o DIR      results [bench/results/hooks]
set -u
BIN=./ddpbench
ROUNDS=3
STEPS=30
WORLDS="2 4"
OUT=bench/results/hooks
while getopts b:r:s:w:o: opt; do
    case $opt in
    b) BIN=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    s) STEPS=$OPTARG ;;
    w) WORLDS=$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) exit 2 ;;
    esac
done
START=10
HOOKS="none fp16 bf16 powersgd:4:$START"
mkdir -p "$OUT"
RUNS="$OUT/runs.jsonl"
: >"$RUNS"
B=$(mktemp -d)
trap 'rm -rf "$B"' EXIT
cp "$BIN" "$B/ddpbench"
load() { cut -d' ' -f1 /proc/loadavg; }
{
    echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nproc) cpus, load $(cat /proc/loadavg)"
    echo "$("$B/ddpbench" --version 2>&1 | head -n 1)"
} >"$OUT/started.txt"

for w in $WORLDS; do
    gpus=$(seq -s, 0 $((w - 1)))
    for round in $(seq 1 "$ROUNDS"); do
        # rotate the order: hook k runs at position (k + round) mod 4
        order=$(echo $HOOKS | tr ' ' '\n' | awk -v r="$round" '{ a[NR] = $0 } END {
            for (i = 0; i < NR; i++) print a[(i + r) % NR + 1] }')
        for h in $order; do
            l0=$(load)
            t0=$(date +%s.%N)
            "$B/ddpbench" --mode ddp --backend cpu --model mlp-medium --samples 4096 --gpus "$gpus" \
                --steps "$STEPS" --warmup-steps $START --log-every 5 --comm-hook "$h" --json \
                >"$B/j" 2>"$B/err" || { echo "bench_hooks: $h on $w: $(cat "$B/err")" >&2; continue; }
            python3 - "$B/j" "$h" "$w" "$round" "$l0" "$(load)" "$t0" "$(date +%s.%N)" >>"$RUNS" <<'PY'
import json, sys
o = json.loads(open(sys.argv[1]).readline())
h = o["comm_hook"]
m = o["machine"] or {}
row = {"hook": sys.argv[2], "world": int(sys.argv[3]), "round": int(sys.argv[4]),
       "load_before": float(sys.argv[5]), "load_after": float(sys.argv[6]),
       "seconds": float(sys.argv[8]) - float(sys.argv[7]),
       "step_p50_s": o["step_time_s"]["p50"], "step_p10_s": o["step_time_s"]["p10"],
       "step_p95_s": o["step_time_s"]["p95"], "final_loss": o["final_loss"],
       "disturbed": m.get("disturbed"), "contention": m.get("contention"),
       "bytes_per_step": sum(b["bytes"] for b in (o["buckets"] or [])),
       "bytes_per_step_plain": None, "drift": None, "final_loss_plain": None, "loss_curve": None}
if h:
    row["bytes_per_step"] = h["bytes_per_step"]
    row["bytes_per_step_plain"] = h["bytes_per_step_plain"]
    if h["drift"]:
        row["drift"] = h["drift"]["params_rel_l2"]
        row["final_loss_plain"] = h["drift"]["final_loss_plain"]
        row["loss_curve"] = h["drift"]["loss_curve"]
print(json.dumps(row))
PY
        done
    done
done

python3 - "$RUNS" >"$OUT/summary.md" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loads = [r["load_before"] for r in rows] + [r["load_after"] for r in rows]
print("bench_hooks: %d runs; load average during them %.1f to %.1f (median %.1f); %d of them "
      "disturbed by ddpbench's own measure" % (len(rows), min(loads), max(loads), st.median(loads),
                                              sum(1 for r in rows if r["disturbed"])))
print()
print("| ranks | hook | bytes/step/rank | vs plain | step p50 (median of rounds) [min, max] | vs plain | drift (rel. L2) | final loss (plain) |")
print("|---|---|---|---|---|---|---|---|")
for w in sorted({r["world"] for r in rows}):
    base = [r["step_p50_s"] for r in rows if r["world"] == w and r["hook"] == "none"]
    b0 = st.median(base) if base else float("nan")
    plain_bytes = next((r["bytes_per_step"] for r in rows if r["world"] == w and r["hook"] == "none"), None)
    for h in ["none", "fp16", "bf16"] + sorted({r["hook"] for r in rows if r["hook"].startswith("powersgd")}):
        rs = [r for r in rows if r["world"] == w and r["hook"] == h]
        if not rs:
            continue
        t = [r["step_p50_s"] for r in rs]
        by = rs[-1]["bytes_per_step"]
        d = [r["drift"] for r in rs if r["drift"] is not None]
        print("| %d | %s | %.2f MiB | %s | %.3f s [%.3f, %.3f] | %s | %s | %.5g (%s) |" % (
            w, h, by / 2**20, "%.2fx less" % (plain_bytes / by) if plain_bytes and h != "none" else "",
            st.median(t), min(t), max(t), "%.2fx" % (st.median(t) / b0) if h != "none" else "",
            "%.2g" % d[-1] if d else "0 (the reference)", rs[-1]["final_loss"],
            "%.5g" % rs[-1]["final_loss_plain"] if rs[-1]["final_loss_plain"] is not None else "-"))
PY
cat "$OUT/summary.md"
