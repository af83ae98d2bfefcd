#!/bin/sh
# tests/e2e/e2e_peak.sh: every run says how far it is from the machine and
# which kernels ran (docs/results.md).  Single, dp and ddp give each device's
# FLOP/s, its measured peak and the share in --json, the share in (0, 1.2]
# on a quiet machine and beside two busy loops (a descheduled calibration
# must not push it past 1), the FLOPs those of the model (forward, backward,
# the optimizer on the devices that step it); the table, --explain and
# compare show them.  OPENBLAS_CORETYPE is named in the banner and --json as
# what chose the kernels, never overridden, and on an AVX-512 CPU a narrower
# core forced by it gets its note; the A/B gate refuses a base and a
# candidate that ran different kernels.
# Usage: sh tests/e2e/e2e_peak.sh ./ddpbench
E2E=e2e_peak
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
S="--model mlp-small --backend cpu --gpus 0,1 --steps 12 --warmup-steps 2 --quiet"

# shares MODE FILE: the run's figures against the model's FLOPs
shares() {
    $PY - "$@" <<'EOF'
import json, sys
mode, d = sys.argv[1], json.load(open(sys.argv[2]))
L = d["config"]["layers"]
per_row = sum((6 if l else 4) * L[l] * L[l + 1] + 2 * L[l + 1] for l in range(len(L) - 1))
nparams = sum(L[l] * L[l + 1] + L[l + 1] for l in range(len(L) - 1))
steppers = {"single": 1, "dp": 1, "ddp": len(d["devices"])}[mode]  # adam: 16 a parameter
want = d["steps"]["timed"] * (d["config"]["batch"] * per_row + steppers * 16 * nparams)
got = sum(x["flops_per_s"] for x in d["devices"]) * d["timed_s"]
bad = []
if abs(got / want - 1) > 1e-6:
    bad.append("FLOPs %.6g, the model's %.6g" % (got, want))
for x in d["devices"] + [d]:
    s = x["peak_share"]
    if not (s is not None and 0 < s <= 1.2):
        bad.append("share %s" % s)
for x in d["devices"]:
    if not (x["peak_flops_per_s"] or 0) > 1e9:
        bad.append("peak %s" % x["peak_flops_per_s"])
print("; ".join(bad))
sys.exit(1 if bad else 0)
EOF
}

for mode in single dp ddp; do
    g=$S
    [ $mode = single ] && g=$(echo "$S" | sed 's/--gpus 0,1/--gpus 0/')
    # shellcheck disable=SC2086 # the options are meant to split
    "$BIN" --mode $mode $g --json >"$T/$mode.json" 2>"$T/$mode.err" || ko "$mode: $(tail -1 "$T/$mode.err")"
    out=$(shares $mode "$T/$mode.json") && ok || ko "$mode --json: $out"
done

# beside two busy loops: a calibration the scheduler interrupted is the slower
# one, and the faster of two windows is kept
sh -c 'while :; do :; done' &
H1=$!
sh -c 'while :; do :; done' &
H2=$!
e2e_on_exit() { kill $H1 $H2 2>/dev/null; }
for mode in single dp ddp; do
    g=$S
    [ $mode = single ] && g=$(echo "$S" | sed 's/--gpus 0,1/--gpus 0/')
    # shellcheck disable=SC2086
    "$BIN" --mode $mode $g --json >"$T/busy.json" 2>"$T/busy.err" || ko "busy $mode: $(tail -1 "$T/busy.err")"
    out=$(shares $mode "$T/busy.json") && ok || ko "$mode beside two busy loops: $out"
done
kill $H1 $H2 2>/dev/null
wait $H1 $H2 2>/dev/null

# the table, --explain and compare
# shellcheck disable=SC2086
"$BIN" --mode ddp $S --explain >"$T/ddp.txt" 2>&1 || ko "ddp --explain"
grep -Eq '^    share of peak +[0-9]+% +[0-9]+%$' "$T/ddp.txt" && ok || ko "the table has no share of the peak"
grep -Eq '^  - Rank 0 computed [0-9.]+ GFLOP/s, [0-9]+% of its peak \([0-9.]+ GFLOP/s: an FMA loop' \
    "$T/ddp.txt" && ok || ko "--explain does not say how far rank 0 is from its peak"
# shellcheck disable=SC2086
"$BIN" --mode compare $S >"$T/cmp.txt" 2>&1 || ko "compare"
grep -Eq '^  share of peak +[0-9]+% +[0-9]+% +[0-9]+%$' "$T/cmp.txt" && ok || ko "compare: no share row"

# the kernels: the user's variable chooses them, and the run says so
R="--mode single --layers 10,10 --batch 20 --steps 4 --backend cpu"
# shellcheck disable=SC2086
OPENBLAS_CORETYPE=Haswell "$BIN" $R >"$T/hsw.txt" 2>&1 || ko "OPENBLAS_CORETYPE=Haswell: failed"
grep -q '(core Haswell, chosen by OPENBLAS_CORETYPE=Haswell)' "$T/hsw.txt" && ok ||
    ko "the banner does not name the variable that chose the core: $(grep OpenBLAS "$T/hsw.txt")"
if grep -qw avx512f /proc/cpuinfo; then
    grep -q '^  note: OPENBLAS_CORETYPE=Haswell in the environment: AVX2 kernels on an AVX-512 CPU (an FMA loop' \
        "$T/hsw.txt" && ok || ko "no note on the narrower kernels: $(cat "$T/hsw.txt")"
fi
# shellcheck disable=SC2086
OPENBLAS_CORETYPE=Haswell "$BIN" $R --json 2>/dev/null | $PY -c '
import json, sys
k = json.load(sys.stdin)["environment"]["blas_core"]
sys.exit(not (k["name"] == "Haswell" and k["chosen_by"] == "OPENBLAS_CORETYPE" and k["vector_bits"] == 256))' &&
    ok || ko "--json: blas_core does not say Haswell chosen by OPENBLAS_CORETYPE"
# shellcheck disable=SC2086
env -u OPENBLAS_CORETYPE "$BIN" $R >"$T/own.txt" 2>&1 || ko "without the variable: failed"
grep -q 'chosen by\|note: OPENBLAS_CORETYPE' "$T/own.txt" && ko "no variable, yet a note: $(cat "$T/own.txt")" || ok

# the A/B gate: kernels that differ are refused, not judged
abs=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
printf '#!/bin/sh\nunset OPENBLAS_CORETYPE\nexec "%s" "$@"\n' "$abs" >"$T/own.sh"
printf '#!/bin/sh\nOPENBLAS_CORETYPE=Haswell exec "%s" "$@"\n' "$abs" >"$T/hsw.sh"
chmod +x "$T/own.sh" "$T/hsw.sh"
# shellcheck disable=SC2086
B=$("$T/own.sh" $R --json 2>/dev/null | $PY -c 'import json,sys; print(json.load(sys.stdin)["environment"]["blas_core"]["name"])')
if [ "$B" != Haswell ]; then
    # shellcheck disable=SC2086
    expect_error "the base ran OpenBLAS's $B kernels and the candidate its Haswell kernels" \
        $R --against "$T/own.sh" --candidate "$T/hsw.sh" --repeat 6 --quiet
fi
e2e_finish
