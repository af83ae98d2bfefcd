#!/bin/sh
# tests/e2e/e2e_machine.sh: beside two busy loops, no wait is called the
# strategy's beyond what its undisturbed share explains (docs/results.md,
# "the machine's share").  One compare of mlp-small with --explain and
# --report runs while two shell loops spin on the 2 cores; the default table
# gives every device's waits (idle, comm exposed, replicate, scatter) and
# its descheduled time, and so the most of a device's waits the strategy can
# own: its waits less the longest its peer was descheduled.  Every wait the
# verdict, --explain's narrative and the page's verdict give as the
# strategy's ("the others idle T", "its idle T", "T at hand-offs", "waited
# T for the rest", "T more idle" ...) must be within its mode's bound
# (rounding aside), the bucket narration's machine share of rank 0's wait
# at least what its peer's descheduled time explains, and a comparison of
# two modes given in one percentage.  Main's build before this change fails
# it: "the other devices sit idle 15.00 ms per step" beside a bound of 0.
# Usage: sh tests/e2e/e2e_machine.sh ./ddpbench
E2E=e2e_machine
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

LOOPS=
e2e_on_exit() { for p in $LOOPS; do kill "$p" 2>/dev/null; done; }
sh -c 'while :; do :; done' &
LOOPS=$!
sh -c 'while :; do :; done' &
LOOPS="$LOOPS $!"
load0=$(cut -d' ' -f1 /proc/loadavg)
"$BIN" --backend cpu --gpus 0,1 --explain --report "$T/page.html" --quiet >"$T/out.txt" 2>&1 ||
    ko "the compare beside two busy loops failed: $(tail -2 "$T/out.txt")"
for p in $LOOPS; do kill "$p" 2>/dev/null; done
LOOPS=
$PY - "$T/out.txt" "$T/page.html" "$load0" >"$T/check.out" 2>&1 <<'EOF'
import html, re, sys

out = open(sys.argv[1]).read()
page = open(sys.argv[2]).read() if sys.argv[2] else ""
bad = []
# the default table: ms per step, columns single, dp dev0, dp others, ddp dev0, ddp others
cols = {}
block = out.split("time per step (ms)")[1].split("sum of phases")[0]
for line in block.splitlines()[1:]:
    m = re.match(r"\s+(\S.*?)\s{2,}([-0-9.]+(?:\s+[-0-9.]+){4})\s*$", line)
    if m:
        cols[m.group(1).split(" (")[0]] = [float(v) for v in m.group(2).split()]
def row(name, c):
    return cols.get(name, [0.0] * 5)[c]
WAITS = ("idle", "comm exposed", "replicate", "scatter")
def bound(c, peer):
    """the most of column c's waits the strategy may own: less its peer's descheduled"""
    w = sum(row(k, c) for k in WAITS)
    return w - min(w, row("descheduled", peer))
B = {"DP": max(bound(1, 2), bound(2, 1)), "DDP": max(bound(3, 4), bound(4, 3))}
B["dp0"], B["dp1"] = bound(1, 2), bound(2, 1)
def secs_ms(v, unit):
    return float(v) * {"s": 1e3, "ms": 1, "us": 1e-3}[unit]
T = r"([0-9.]+) (ms|us|s)\b"
def within(claim, lim, what):
    if claim > lim * 1.03 + 0.01:
        bad.append("%s: %.3f ms given as the strategy's, its bound %.3f ms" % (what, claim, lim))
def check(text, where):
    text = " ".join(text.split())
    for sent in re.split(r"(?<=[.;]) ", text):
        mode = "DDP" if re.search(r"\bDDP\b", sent) and not re.search(r"\bDP\b", sent) else "DP"
        if re.search(r"\bDDP (ran|overlaps|adds|spends)|Why DDP|what DDP adds", sent):
            mode = "DDP"
        for m in re.finditer(r"(?:others|other devices) (?:sit )?idle " + T, sent):
            within(secs_ms(m.group(1), m.group(2)), B["dp1"], where + ": " + m.group(0))
        for m in re.finditer(r"its idle " + T, sent):
            within(secs_ms(m.group(1), m.group(2)), B["dp0"], where + ": " + m.group(0))
        for m in re.finditer(T + r" at hand-offs", sent):
            within(secs_ms(m.group(1), m.group(2)), B["dp1"], where + ": " + m.group(0))
        for m in re.finditer(r"wait(?:ed|s) " + T + r" for", sent):
            within(secs_ms(m.group(1), m.group(2)), B["DDP"], where + ": " + m.group(0))
        for m in re.finditer(T + r" more (?:in )?(idle|comm exposed|reduce|replicate|scatter)", sent):
            within(secs_ms(m.group(1), m.group(2)), B[mode], where + ": " + m.group(0))
    pct = set(re.findall(r"(?:faster by|differ by) (\d+)%", text))
    if len(pct) > 1:
        bad.append("%s: one comparison in %d percentages: %s" % (where, len(pct), sorted(pct)))
# the verdict and --explain's narrative (compare's text, before the runs' own stories)
check(out.split("parameters: ddp vs single")[1].split("\nexplain:")[0], "compare")
# the bucket narration: rank 0's wait in the told step, its machine share
for m in re.finditer(r"Of rank 0's " + T + r" waited after backward, " + T +
                     r" is the machine's: rank \d+ was descheduled " + T, out):
    w, mm, d = (secs_ms(m.group(i), m.group(i + 1)) for i in (1, 3, 5))
    if mm < min(w, d) * 0.97 - 0.01:
        bad.append("bucket narration: %.3f ms the machine's of %.3f, its peer descheduled %.3f" % (mm, w, d))
# the page's verdict
v = re.search(r'<p class="verdict">(.*?)</p>', page, re.S)
if not v:
    bad.append("the page has no verdict")
else:
    check(html.unescape(re.sub(r"<[^>]+>", "", v.group(1))), "page")
print("\n".join(bad) if bad else
      "bounds (ms a step): dp device 0 %.3f, dp device 1 %.3f, ddp %.3f; load %s beside two loops"
      % (B["dp0"], B["dp1"], B["DDP"], sys.argv[3]))
sys.exit(1 if bad else 0)
EOF
if [ $? -eq 0 ]; then
    ok
    echo "$E2E: $(cat "$T/check.out")"
else
    ko "$(cat "$T/check.out")"
fi
e2e_finish
