#!/usr/bin/python3
# summarise.py runs.jsonl: the spread of each candidate figure's log-ratios (1.4826 x MAD / standard deviation) and its median change, per kind of A/B pair
import json, sys, math, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r["round"] > 0]  # round 0 = warm-up
loads = [r["load"] for r in rows] + [r["load_after"] for r in rows]
print("rounds per kind:", len(rows)//4, "load %.1f..%.1f median %.1f" % (min(loads), max(loads), st.median(loads)))
figs = list(rows[0]["base"].keys())
kinds = ["single-same","single-slow","ddp-same","ddp-slow"]
print("%-22s" % "figure" + "".join("%-24s" % k for k in kinds))
for f in figs:
    line = "%-22s" % f
    for k in kinds:
        d = [math.log(r["cand"][f]/r["base"][f]) for r in rows if r["kind"] == k]
        if len(d) < 2: line += "%-24s" % "-"; continue
        med = st.median(d)
        mad = 1.4826 * st.median([abs(x - med) for x in d])
        line += "%-24s" % ("%.3f/%.3f (%+.1f%%)" % (mad, st.stdev(d), 100*(math.exp(med)-1)))
    print(line)
