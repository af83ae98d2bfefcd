#!/bin/sh
# bench/predict_stability.sh: does --predict say the same thing run after
# run on a busy machine?  Runs `ddpbench --mode single --predict --json`
# RUNS times (3) beside LOOPS busy shell loops (2; 0 for the machine as it
# is), then for 1..8 devices: whether DP and DDP come in the same order in
# every run, and how far each one's predicted step spreads (the largest over
# the smallest, less 1); and the collectives' fits as each run took them.
# The goal (issue 43): the same order at every device count, every step
# within 15%, at load 4-8.  Prints the load before and after; exits 1 when
# the goal is missed.
# Usage: sh bench/predict_stability.sh [./ddpbench] [extra options...]
BIN=${1:-./ddpbench}
[ $# -gt 0 ] && shift
RUNS=${RUNS:-3}
LOOPS=${LOOPS:-2}
T=$(mktemp -d)
pids=
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT INT TERM
i=0
while [ "$i" -lt "$LOOPS" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done
sleep 2
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($LOOPS busy loops planted)"
i=0
while [ "$i" -lt "$RUNS" ]; do
    "$BIN" --mode single --backend cpu --predict --json --quiet "$@" >"$T/run$i.json" 2>"$T/run$i.err" ||
        { echo "run $i failed: $(tail -1 "$T/run$i.err")"; exit 1; }
    i=$((i + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$T" "$RUNS" <<'EOF'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
runs = [json.loads(open("%s/run%d.json" % (d, i)).read().strip().splitlines()[-1]) for i in range(n)]
for i, r in enumerate(runs):
    p = r["predict"]
    fits = "; ".join("%s %.2f us + bytes / %.2f GB/s" % (k, p[k]["alpha_s"] * 1e6, 1e-9 / p[k]["beta_s_per_byte"])
                     for k in ("all_reduce", "broadcast", "reduce") if p.get(k) and p[k]["beta_s_per_byte"] > 0)
    print("run %d: single's step %.3f ms, contention %.2f; %s" % (i + 1, r["step_time_s"]["mean"] * 1e3,
          r["machine"]["contention"], fits))
ok = True
print("devices  dp step (ms) per run          ddp step (ms) per run         order    dp spread  ddp spread")
for k in range(8):
    rows = [r["predict"]["rows"][k] for r in runs]
    dp = [x["dp_step_s"] * 1e3 for x in rows]
    ddp = [x["ddp_step_s"] * 1e3 for x in rows]
    order = set("dp" if a < b else "ddp" if b < a else "tie" for a, b in zip(dp, ddp))
    sdp, sddp = max(dp) / min(dp) - 1, max(ddp) / min(ddp) - 1
    same = len(order) == 1
    ok = ok and same and sdp <= 0.15 and sddp <= 0.15
    print("%-8d %-29s %-29s %-8s %7.1f%% %10.1f%%" % (k + 1, " ".join("%.3f" % v for v in dp),
          " ".join("%.3f" % v for v in ddp), "/".join(sorted(order)) + ("" if same else " FLIPS"),
          100 * sdp, 100 * sddp))
print("goal (same order, steps within 15%%): %s" % ("met" if ok else "NOT met"))
sys.exit(0 if ok else 1)
EOF
