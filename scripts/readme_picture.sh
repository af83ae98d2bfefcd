#!/bin/sh
# scripts/readme_picture.sh: the README's picture (docs/report.png), made again
# from a run where the lesson shows, and the figures it shows, to quote under it.
#
# The run: compare on 2 CPU devices, a model whose optimizer step is a good
# part of its step (256-1024-1024-10, Adam, batch 64), so DP's device 0 is
# seen stepping the optimizer alone while the other device idles, and DDP's
# ranks all-reducing during and after backward.  The page is drawn with
# --report, its top (verdict, the timelines, the phases per step) shot in
# headless Chromium at 1000 px.  A picture shows the lesson only where the
# machine showed it: when any device of the run was descheduled more than 5%
# of its step, or the run was disturbed, the script stops (exit 1) and says
# so; run it again on a quieter machine.
#
# usage: sh scripts/readme_picture.sh [./ddpbench] [OUT.png]
# Prints the figures to quote under the picture (markdown), and the load.
set -u
BIN=${1:-./ddpbench}
OUT=${2:-docs/report.png}
RUN="--mode compare --backend cpu --gpus 0,1 --layers 256,1024,1024,10 --loss ce --optim adam
     --batch 64 --steps 60"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
command -v chromium >/dev/null || { echo "readme_picture: chromium is not installed" >&2; exit 2; }
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
load0=$(cut -d' ' -f1 /proc/loadavg)
# shellcheck disable=SC2086 # the options are meant to split
"$BIN" $RUN --report "$T/page.html" --json >"$T/runs.jsonl" 2>"$T/err" || {
    echo "readme_picture: the run failed: $(tail -2 "$T/err")" >&2
    exit 1
}
load1=$(cut -d' ' -f1 /proc/loadavg)
$PY - "$T/runs.jsonl" "$load0" "$load1" >"$T/quote.md" <<'EOF' || { cat "$T/quote.md" >&2; exit 1; }
import json, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        runs[d["config"]["mode"]] = d
def ph(d, dev, key):
    return d["devices"][dev]["phases_s_per_step"][key]
busy = []
for mode, d in runs.items():
    step = d["step_time_s"]["mean"]
    for i, dev in enumerate(d["devices"]):
        q = dev["phases_s_per_step"]["descheduled_s"]
        if q > 0.05 * step:
            busy.append("%s device %d descheduled %.0f%% of its step" % (mode, i, 100 * q / step))
    if (d.get("machine") or {}).get("disturbed"):
        busy.append("%s disturbed: %s" % (mode, d["machine"].get("why", "")))
if busy:
    print("readme_picture: the machine was busy (%s): the picture would show it, not the lesson; "
          "run it again when it is quieter" % "; ".join(busy))
    sys.exit(1)
us = lambda s: "%.0f us" % (s * 1e6) if s < 1e-3 else "%.2f ms" % (s * 1e3)
s, dp, ddp = runs["single"], runs["dp"], runs["ddp"]
alone = sum(ph(dp, 0, k) for k in ("optimizer_s", "loss_s", "data_s"))
hidden = ph(ddp, 0, "comm_hidden_s")
exposed = ph(ddp, 0, "comm_exposed_s")
print("Measured in that run (%s, load %s -> %s on %s CPUs): single %.0f samples/s; DP %.2fx "
      "single, its device 0 working alone %s a step (optimizer %s, gather+loss %s) while device "
      "1 sits idle %s; DDP %.2fx single, %.0f%% of its all-reduce (%s) during backward and %s "
      "waited for after it. On a CPU DP often keeps up with DDP "
      "([why](docs/modes.md#what-a-cpu-does-not-reproduce))." % (
          "256-1024-1024-10, Adam, batch 64, 2 CPU devices", sys.argv[2], sys.argv[3],
          s["environment"]["cpus_online"],
          s["throughput_samples_per_s"], dp["throughput_samples_per_s"] / s["throughput_samples_per_s"],
          us(alone), us(ph(dp, 0, "optimizer_s")), us(ph(dp, 0, "loss_s")), us(ph(dp, 1, "idle_s")),
          ddp["throughput_samples_per_s"] / s["throughput_samples_per_s"],
          100 * hidden / (hidden + exposed) if hidden + exposed > 0 else 0, us(hidden), us(exposed)))
EOF
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,1250 \
    --screenshot="$T/shot.png" "file://$T/page.html" >/dev/null 2>&1 || {
    echo "readme_picture: chromium could not shoot the page" >&2
    exit 1
}
cp "$T/shot.png" "$OUT"
echo "readme_picture: $OUT from: ddpbench $(echo $RUN | tr -s ' ')"
cat "$T/quote.md"
