#!/bin/sh
# bench/bench_zero.sh: plain DDP against ZeRO-1, -2 and -3 on mlp-medium, 2 and 4 CPU
# workers: the step time with its noise (median and range of the runs' median
# steps, the runs interleaved round by round, each its own process), the
# communication the step waited for (comm exposed plus ZeRO-3's all-gather
# wait), and each device's peak memory by purpose; the load and the share of
# the cores other processes took during each run beside them.
#
#   sh bench/bench_zero.sh [-r rounds] [-s steps] [-k bucket-mb] [-n "2 4"] [-b ./ddpbench]
#                          [-o bench/results/zero-cpu.json]
#
# Defaults: 5 rounds of 12 steps (2 warm-up), --bucket-mb 4 for every mode
# (each of mlp-medium's weight matrices its own bucket: ZeRO-2 reuses two
# bucket buffers instead of holding the whole gradient arena; at the default
# 25 MiB its buffers would hold the whole model).  The JSON file keeps every
# run; a table goes to stdout.
set -eu
ROUNDS=5 STEPS=12 BUCKET=4 DEVS="2 4" BIN=./ddpbench OUT=bench/results/zero-cpu.json
while getopts r:s:k:n:b:o:h opt; do
    case $opt in
    r) ROUNDS=$OPTARG ;; s) STEPS=$OPTARG ;; k) BUCKET=$OPTARG ;; n) DEVS=$OPTARG ;;
    b) BIN=$OPTARG ;; o) OUT=$OPTARG ;;
    *) sed -n 2,16p "$0"; exit 2 ;;
    esac
done
[ -x "$BIN" ] || { echo "bench_zero: no $BIN (make first)" >&2; exit 2; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
STAGES="0 1 2 3"
echo "bench_zero: mlp-medium, devices $DEVS, stages $STAGES, $ROUNDS rounds of $STEPS steps, --bucket-mb $BUCKET; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
r=1
while [ $r -le "$ROUNDS" ]; do
    for n in $DEVS; do
        gpus=$(seq -s, 0 $((n - 1)))
        # each round in another order (rotated by the round), so no stage
        # always follows the same one
        order=$(echo $STAGES | awk -v r=$r '{ for (i = 0; i < NF; i++) printf "%s ", $((i + r) % NF + 1) }')
        for z in $order; do
            "$BIN" --backend cpu --model mlp-medium --mode ddp --gpus "$gpus" --zero "$z" \
                --steps "$STEPS" --bucket-mb "$BUCKET" --json --quiet >"$D/run-$n-$z-$r.json" ||
                { echo "bench_zero: ddp --zero $z on $n failed" >&2; exit 1; }
        done
    done
    echo "bench_zero: round $r of $ROUNDS done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
    r=$((r + 1))
done
mkdir -p "$(dirname "$OUT")"
python3 - "$D" "$OUT" "$DEVS" "$ROUNDS" "$BUCKET" <<'EOF'
import glob, json, os, statistics, sys
d, out, devs, rounds, bucket = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4]), sys.argv[5]
MiB = 1048576.0
runs, table = [], []
for n in devs:
    for z in "0123":
        rs = []
        for r in range(1, rounds + 1):
            j = json.load(open(os.path.join(d, "run-%s-%s-%d.json" % (n, z, r))))
            devs_ = j["devices"]
            ph = [x["phases_s_per_step"] for x in devs_]
            exposed = statistics.mean(p.get("comm_exposed_s", 0) + p.get("all_gather_wait_s", 0) for p in ph)
            gwait = statistics.mean(p.get("all_gather_wait_s", 0) for p in ph)
            m = j["machine"]
            rs.append({"round": r, "step_p50_s": j["step_time_s"]["p50"], "exposed_s": exposed,
                       "all_gather_wait_s": gwait, "mem_split": devs_[0]["mem_peak_split"],
                       "mem_peak": max(x["mem_peak_bytes"] for x in devs_),
                       "loadavg_start": m.get("loadavg_start"), "loadavg_end": m.get("loadavg_end"),
                       "others_cores": m.get("others_cores"), "disturbed": m.get("disturbed"),
                       "checksum": j["checksum"]["bits"]})
        steps = sorted(x["step_p50_s"] for x in rs)
        exp = sorted(x["exposed_s"] for x in rs)
        loads = [x["loadavg_start"] for x in rs if x["loadavg_start"] is not None]
        others = [x["others_cores"] for x in rs if x["others_cores"] is not None]
        row = {"devices": int(n), "zero": int(z), "runs": rs,
               "step_median_s": statistics.median(steps), "step_min_s": steps[0], "step_max_s": steps[-1],
               "exposed_median_s": statistics.median(exp), "exposed_min_s": exp[0], "exposed_max_s": exp[-1],
               "all_gather_wait_median_s": statistics.median(x["all_gather_wait_s"] for x in rs),
               "mem_split": rs[0]["mem_split"], "mem_peak": rs[0]["mem_peak"],
               "load_median": statistics.median(loads) if loads else None,
               "others_cores_median": statistics.median(others) if others else None,
               "same_bits_as_ddp": None}
        table.append(row)
for row in table:
    ref = next(x for x in table if x["devices"] == row["devices"] and x["zero"] == 0)
    row["same_bits_as_ddp"] = all(a["checksum"] == ref["runs"][0]["checksum"] for a in row["runs"])
doc = {"bench": "bench_zero", "model": "mlp-medium", "backend": "cpu", "bucket_mb": float(bucket),
       "rounds": rounds, "cpus_online": os.cpu_count(), "rows": table}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
print("mlp-medium on CPU workers, --bucket-mb %s; step and exposed communication: median [min, max] of %d interleaved runs' median steps"
      % (bucket, rounds))
print("| devices | mode | step (ms) | exposed comm (ms) | of which all-gather wait | peak MiB | params | grads | optimizer | activations | load | others' cores | same bits |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in table:
    ms = lambda s: "%.1f" % (s * 1e3)
    m = r["mem_split"]
    print("| %d | %s | %s [%s, %s] | %s [%s, %s] | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %s |" % (
        r["devices"], "ddp" if r["zero"] == 0 else "zero-%d" % r["zero"],
        ms(r["step_median_s"]), ms(r["step_min_s"]), ms(r["step_max_s"]),
        ms(r["exposed_median_s"]), ms(r["exposed_min_s"]), ms(r["exposed_max_s"]),
        ms(r["all_gather_wait_median_s"]), r["mem_peak"] / MiB, m["params"] / MiB, m["grads"] / MiB,
        m["optimizer"] / MiB, m["activations"] / MiB, r["load_median"] or 0, r["others_cores_median"] or 0,
        "yes" if r["same_bits_as_ddp"] else "NO"))
EOF
