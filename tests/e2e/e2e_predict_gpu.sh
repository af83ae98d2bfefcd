#!/bin/sh
# tests/e2e/e2e_predict_gpu.sh: the GPU lesson from the command line
# (--predict --hardware NAME|FILE [--workload NAME|FILE], app/predict/):
# the table on 1..count GPUs with the sentence naming DP's slower term, in
# about a second with nothing trained; --json's predict object (one row per
# GPU count, seconds per step); a profile given as a file; every bad profile
# one line naming the file and the key, exit 2; and the run's own MLP
# modelled beside a training run.
# Usage: sh tests/e2e/e2e_predict_gpu.sh ./ddpbench
E2E=e2e_predict_gpu
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

# ---- the lesson, nothing trained ----------------------------------------------------
t0=$(date +%s.%N)
"$BIN" --predict --hardware 2x-titan-rtx-nvlink --workload gpt2-small >"$T/t.out" 2>"$T/t.err"
rc=$?
t1=$(date +%s.%N)
[ $rc -eq 0 ] && ok || ko "--workload gpt2-small: exit $rc: $(cat "$T/t.err")"
grep -q "the term that makes it slower: the outputs gathered onto device 0" "$T/t.out" && ok ||
    ko "no sentence naming DP's slower term: $(cat "$T/t.out")"
[ "$(grep -c '^ *[12] ' "$T/t.out")" -eq 2 ] && ok || ko "not one row per GPU count: $(cat "$T/t.out")"
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 2.0) }' && ok || ko "--workload took $t0..$t1 s (about a second)"
grep -q "checked against https://huggingface.co" "$T/t.out" && ok || ko "no published check on the box"

# --json: {"predict": {"hardware", "workload", "rows": [{devices, single_s, dp_s, ddp_s}]}}
"$BIN" --predict --hardware dgx1-v100 --workload resnet50 --json >"$T/j.json" 2>"$T/j.err" && ok ||
    ko "--json: $(cat "$T/j.err")"
$PY - "$T/j.json" <<'PYEOF' && ok || ko "--json: the predict object is not as documented"
import json, sys
o = json.load(open(sys.argv[1]))["predict"]
assert o["hardware"] == "dgx1-v100" and o["workload"] == "resnet50", o
rows = o["rows"]
assert [r["devices"] for r in rows] == list(range(1, 9)), rows
for r in rows:
    assert all(r[k] > 0 for k in ("single_s", "dp_s", "ddp_s")), r
    assert abs(sum(r["ddp_terms_s"].values()) - r["ddp_s"]) < 1e-9, r
assert abs(rows[0]["single_s"] - 0.097) / 0.097 < 0.05, rows[0]
PYEOF

# a profile as a file, with only the issue's required keys
cat >"$T/box.json" <<'JEOF'
{"name": "my-box", "source": "a test",
 "gpu": {"name": "G", "count": 4, "flops": {"fp32": 20e12, "tf32": 0, "fp16": 100e12, "bf16": 0},
         "mem_bw": 1e12, "memory": 32e9},
 "link": {"kind": "pcie", "p2p": true, "bw": 25e9, "latency": 5e-6},
 "host": {"pcie_bw": 16e9}}
JEOF
cat >"$T/w.json" <<'JEOF'
{"name": "my-model", "source": "a test", "params": 1e8, "dtype": "fp32",
 "flops_per_sample": 1e11, "batch_per_device": 8,
 "input_bytes_per_sample": 4096, "output_bytes_per_sample": 4e6, "ops_per_step": 500}
JEOF
"$BIN" --predict --hardware "$T/box.json" --workload "$T/w.json" --json >"$T/f.json" 2>"$T/f.err" &&
    [ "$($PY -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["predict"]["rows"]))' "$T/f.json")" = 4 ] &&
    ok || ko "a profile file: $(cat "$T/f.err")"
ABS="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
(cd "$T" && "$ABS" --hardware box.json --workload w.json >/dev/null 2>&1) && ok ||
    ko "a profile file named relative to the folder"

# ---- bad profiles: exit 2, one line naming the file and the key ---------------------
bad() { # KEY SED-EXPRESSION
    sed "$2" "$T/box.json" >"$T/bad.json"
    expect_error "--hardware $T/bad.json: $1" --hardware "$T/bad.json" --workload "$T/w.json"
}
bad "link.bw: missing" 's/"bw": 25e9, //'
bad "link.bw: 0 is out of range" 's/"bw": 25e9/"bw": 0/'
bad "link.bw: -2.5e+10 is out of range" 's/"bw": 25e9/"bw": -25e9/'
bad "gpu.count: 0 is out of range" 's/"count": 4/"count": 0/'
bad "gpu.count: not a number" 's/"count": 4/"count": "four"/'
bad "host.pcie_bw: not a number" 's/"pcie_bw": 16e9/"pcie_bw": "fast"/'
bad "not valid JSON" 's/}}$/}/'
# a misspelt optional key would read as its default: refused, at any depth
bad "gpu.efficency: not a key of this profile" 's/"count": 4/"count": 4, "efficency": 0.9/'
bad "colour: not a key of this profile" 's/^{/{"colour": "red", /'
# of a key given twice cJSON reads the first; a rate of 1e-300 B/s made steps of inf ms
bad "link.kind: given twice" 's/"kind": "pcie"/"kind": "pcie", "kind": "nvlink"/'
bad "link.bw: 1e-300 is out of range (at least 1e+06" 's/"bw": 25e9/"bw": 1e-300/'
bad "gpu.flops.fp16: 1e-300 is out of range (0, or at least 1e+06)" 's/"fp16": 100e12/"fp16": 1e-300/'
expect_error "--hardware no-such-box: no shipped hardware profile of that name" --hardware no-such-box --workload gpt2-small
expect_error "--workload no-such-model: no shipped workload profile" --hardware 2x-titan-rtx-nvlink --workload no-such-model
expect_error "--workload gpt2-small: needs --hardware" --workload gpt2-small
expect_error "--workload gpt2-small: nothing is trained, so --report has no run" --hardware dgx1-v100 --workload gpt2-small --report "$T/x.html"
sed 's/"dtype": "fp32"/"dtype": "bf16"/' "$T/w.json" >"$T/w16.json"
expect_error "gpu.flops.bf16 is 0" --hardware "$T/box.json" --workload "$T/w16.json"

# ---- the run's own MLP beside a training run -----------------------------------------
"$BIN" --mode single --backend cpu --model seed-linear --steps 6 --warmup-steps 1 --quiet \
    --hardware 8x-a100-sxm --explain >"$T/m.out" 2>&1 && ok || ko "--hardware on a run: $(tail -3 "$T/m.out")"
grep -q "workload this run's MLP" "$T/m.out" && grep -q "The GPU model's terms on 8 GPUs" "$T/m.out" &&
    ok || ko "--hardware on a run: no table or no terms: $(cat "$T/m.out")"
"$BIN" --mode single --backend cpu --model seed-linear --steps 6 --warmup-steps 1 --quiet --json \
    --predict --hardware 2x-h100-pcie >"$T/m.json" 2>/dev/null &&
    $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["predict"]; assert p["hardware"]=="2x-h100-pcie" and len(p["rows"])==2 and p["cpu"]["model"]=="alpha-beta", p' "$T/m.json" &&
    ok || ko "--json on a run: predict is not the GPU model with the CPU's under cpu"
e2e_finish
