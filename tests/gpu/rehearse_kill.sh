#!/bin/sh
# tests/gpu/rehearse_kill.sh EMU-BUILD: the GPU check killed midway from
# outside -- as a lease's command limit kills it, with SIGKILL, no trap run --
# still leaves in its output folder what it finished (part of make test,
# through make test-gpu-kit).
#
# check.sh runs on the emulated GPU of a `make EMU=1` build in EMU-BUILD
# (DDPBENCH_CHECK_EMU: the check's own steps, shell and judgements, on GPUs
# whose figures mean nothing), only its single and ddp steps after the
# libraries and the probe (DDPBENCH_CHECK_STEPS).  Once its streamed
# check.log shows the ddp step begun, its whole process group is killed.
# Then DDPBENCH_CHECK_OUT must hold check.json -- valid JSON, "complete"
# false, the probe's and both single runs' results passed, the step under
# way named -- check.log up to the ddp step's header and without a verdict,
# and check-logs.tar.gz with the probe's and single's logs; and no process
# of the check may be left.
set -eu
EMU=${1:?usage: rehearse_kill.sh EMU-BUILD}
cd "$(dirname "$0")/../.."
fail() {
    echo "gpu-kill-rehearsal: FAIL: $*" >&2
    exit 1
}
[ -x "$EMU/ddpbench" ] || fail "no $EMU/ddpbench (make EMU=1 first)"
T=$(mktemp -d "${TMPDIR:-/tmp}/ddpbench-kill.XXXXXX")
trap 'rm -rf "$T"' EXIT
OUTD=$T/out
mkdir -p "$OUTD" "$T/tmp"
t0=$(date +%s)
# A session of its own (setsid), so that one kill takes the check and all
# it started, as the lease's does.
# An H100's name: the check predicts that box (8x-h100-sxm's profile)
# before its single step measures.
EMU_GPU_NAME="NVIDIA H100 80GB HBM3" \
TMPDIR=$T/tmp DDPBENCH_CHECK_EMU=$EMU DDPBENCH_CHECK_STEPS="single ddp" DDPBENCH_CHECK_OUT=$OUTD \
    setsid sh tests/gpu/check.sh >"$T/stdout" 2>&1 &
pid=$!
i=0
until grep -q '^== ddp ' "$OUTD/check.log" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
        fail "the check ended before its ddp step: $(tail -n 3 "$T/stdout" | tr '\n' ' ')"
    fi
    i=$((i + 1))
    if [ "$i" -ge 1800 ]; then
        kill -9 "-$pid" 2>/dev/null || true
        fail "no ddp step within 180 s: $(tail -n 3 "$OUTD/check.log" 2>/dev/null | tr '\n' ' ')"
    fi
    sleep 0.1
done
pgid=$(ps -o pgid= -p "$pid" | tr -d ' ')
[ "$pgid" = "$pid" ] || fail "the check is not its own process group ($pgid, not $pid): the kill would miss"
kill -9 "-$pid"
wait "$pid" 2>/dev/null || true
killed_at=$(($(date +%s) - t0))
# nothing of the check's group lives on (ddp ranks included)
i=0
while ps -eo pgid= | grep -qx " *$pid"; do
    i=$((i + 1))
    [ "$i" -lt 50 ] || fail "processes of the killed check live on: $(ps -eo pid,pgid,args | awk -v g="$pid" '$2 == g')"
    sleep 0.1
done

# ---- what it left -----------------------------------------------------------------
ls_out=$(ls -A "$OUTD" | tr '\n' ' ')
[ "$ls_out" = "check-logs.tar.gz check.json check.log " ] ||
    fail "the output folder holds '$ls_out', not check.json, check.log and check-logs.tar.gz"
python3 - "$OUTD/check.json" <<'EOF' || fail "check.json: $(head -c 400 "$OUTD/check.json")"
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["name"]: x for x in d["results"]}
need = ["probe", "single gpu0 small", "single gpu0 gelu-sgd"]
bad = [n for n in need if r.get(n, {}).get("status") != "pass"]
assert not bad, "not passed in check.json: %s" % bad
assert d["complete"] is False and d["ok"] is None and d["exit"] is None, "a killed check's json says it ended"
assert d["step"] == "ddp" and d["emulated"] is True, (d["step"], d["emulated"])
assert d["verdict"].startswith("gpu check: under way: step ddp"), d["verdict"]
assert d["passed"] == len([x for x in d["results"] if x["status"] == "pass"])
print("gpu-kill-rehearsal: check.json: %d results, %d passed, step %s under way: %s" %
      (len(d["results"]), d["passed"], d["step"], d["verdict"]))
EOF
grep -q '^PASS  single gpu0 small: ' "$OUTD/check.log" && grep -q '^PASS  single gpu0 gelu-sgd: ' "$OUTD/check.log" ||
    fail "check.log lacks single's results: $(tr '\n' ' ' <"$OUTD/check.log")"
grep -q '^gpu check: ' "$OUTD/check.log" && fail "a killed check's log has a verdict"
logs=$(tar -tzf "$OUTD/check-logs.tar.gz")
for f in logs/probe.json logs/single_gpu0_small.json logs/single_gpu0_gelu-sgd.json; do
    echo "$logs" | grep -qx "$f" || fail "check-logs.tar.gz lacks $f: $(echo "$logs" | tr '\n' ' ')"
done
grep -q 'predicted on 8x-h100-sxm before measuring' "$T/stdout" ||
    fail "the check did not predict its H100 box before measuring: $(grep -i predict "$T/stdout")"
echo "gpu-kill-rehearsal: check.sh killed (SIGKILL, its process group) ${killed_at}s in, at its ddp step: check.json, check.log ($(wc -l <"$OUTD/check.log") lines) and check-logs.tar.gz ($(echo "$logs" | grep -c '^logs/.') logs) hold the probe's and single's results; nothing left running"
