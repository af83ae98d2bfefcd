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
#        sh scripts/readme_picture.sh --quote PAGE.html
# Prints the words to quote under the picture (markdown): the page's own
# verdict, so the caption's figures are the picture's (they were computed
# apart, from rank 0 alone, and read 31% / 204 us / 446 us under a picture
# saying 30% / 192 us / 443 us), and the load.  --quote prints them for a
# page alone.
set -u
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
quote() { # PAGE.html: its verdict's sentences, as plain text
    $PY - "$1" <<'EOF'
import html, re, sys
v = re.search(r'<p class="verdict">(.*?)</p>', open(sys.argv[1]).read(), re.S)
print(" ".join(html.unescape(re.sub(r"<[^>]+>", "", v.group(1))).split()) if v else "")
EOF
}
if [ "${1:-}" = --quote ]; then
    quote "$2"
    exit
fi
BIN=${1:-./ddpbench}
OUT=${2:-docs/report.png}
RUN="--mode compare --backend cpu --gpus 0,1 --layers 256,1024,1024,10 --loss ce --optim adam
     --batch 64 --steps 60"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
command -v chromium >/dev/null || { echo "readme_picture: chromium is not installed" >&2; exit 2; }
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
s = runs["single"]
print("The page of `scripts/readme_picture.sh`'s run (256-1024-1024-10, Adam, batch 64, 2 CPU "
      "devices, load %s -> %s on %s CPUs; the script refuses to shoot a run a busy machine "
      "disturbed): single %.0f samples/s. Its verdict, as the picture shows it: " % (sys.argv[2], sys.argv[3],
      s["environment"]["cpus_online"], s["throughput_samples_per_s"]), end="")
EOF
quote "$T/page.html" >>"$T/quote.md"
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,1250 \
    --screenshot="$T/shot.png" "file://$T/page.html" >/dev/null 2>&1 || {
    echo "readme_picture: chromium could not shoot the page" >&2
    exit 1
}
cp "$T/shot.png" "$OUT"
echo "readme_picture: $OUT from: ddpbench $(echo $RUN | tr -s ' ')"
cat "$T/quote.md"
