#!/bin/sh
# tests/gpu/check.sh: the whole GPU check, for a machine with one or more
# NVIDIA GPUs and nothing of ours installed.  It runs from the GPU kit, which
# is built on a machine with the CUDA toolkit and NCCL (make gpu-kit) and
# carried to the GPU box (the box needs no compiler, no package registry),
# or from a source tree (it builds with make):
#
#   DDPBENCH_CHECK_OUT=DIR sh check.sh        in the kit's folder
#   sh tests/gpu/check.sh                     in a source tree
#   sh check.sh --dry-run                     the steps and their time limits
#   sh check.sh --self-test                   the check's own judgements, on fixtures
#
# What comes back: DIR holds exactly three files, check.json (every result,
# the ratios, the libraries found), check.log (what the check printed) and
# check-logs.tar.gz (every log, well under 16 MiB; no data files).  They are
# written as the check goes, so a check killed from outside (a lease's
# command limit) still leaves what it finished: check.json is rewritten
# (whole, renamed into place) after every result, check.log is streamed
# line by line, and the archive is remade as each step begins; only a
# finished check's check.json says "complete":true.  DIR defaults to
# results/ in the kit and build/gpu-check in a tree; the check writes to
# $OUT only when DIR is $OUT.  The last line printed is the verdict.
#
# The steps, most valuable first, each with its own time limit, the whole
# within BUDGET seconds (default 345: the limits' sum, so that a GPU lent for
# 15 minutes holds its start-up, the check and a rerun), a step that no
# longer fits skipped and named:
#  1. libraries: what lib/libddpbench-cuda.so needs (cudart, cuBLAS, NCCL) and
#     the ld.so cache does not know, found in the toolkit (CUDA_HOME,
#     /usr/local/cuda) or in a python3's site-packages/nvidia/*/lib (PyTorch's
#     wheels), and put on LD_LIBRARY_PATH for our binaries only: python3 runs
#     with the box's own library path, so PyTorch loads its wheels' cuBLAS
#     and NCCL, never the ones found for ddpbench; which PyTorch, and which
#     cuBLAS and NCCL it loads, is recorded;
#  2. probe: ddpbench loads the CUDA backend and counts the GPUs;
#  3. ddpbench against PyTorch eager on the same GPU (torch_ref.py: the same
#     model, loss, optimizer and batch), early: PyTorch first, then
#     ddpbench for mlp-small (GELU, cross-entropy, Adam: launch-bound),
#     mlp-medium and mlp-large in fp32, and mlp-large in --precision bf16
#     (against its fp32 step and PyTorch's bf16 autocast), each with CUDA
#     graphs off and then on (auto), so a graph failure loses only the graph
#     figure; the graphs' gain and launches_per_step each way; mlp-large's
#     step against its GEMMs timed alone (cuBLAS, torch_ref.py --gemms); then
#     mlp-large under ddp (NCCL; skipped, with the reason, when /dev/shm is
#     too small for it);
#  4. single on the GPU against single on the CPU (1e-4, at most one host
#     synchronisation per step);
#  5. ddp (NCCL, one rank per GPU; shm with two ranks on GPU 0) and dp on the
#     GPUs against the CPU: dp --gpus 0,0 with CUDA graphs (auto: one graph
#     of both devices) and without (the graphs' gain), and on a box with two
#     GPUs or more dp over NCCL with --cuda-graph on, under the step's limit,
#     so the box says whether that graph runs or hangs;
#  6. the GPU unit suites (test_cuda, test_comm_nccl but its init-abort
#     tests), one process each;
#  7. faults: an injected rank error and a killed rank under NCCL, a stalled
#     rank (exit 1, the rank named, no hang, nothing left in /dev/shm);
#  8. --trace: the phases' spans are not zero (and the all-reduces' where
#     two ranks or more really reduce); --mode comm checks every result;
#  9. findings: what has never met a real NCCL, reported apart and never
#     failing the check, last so that nothing waits behind it:
#     test_comm_nccl's init-abort tests (a group whose peer never joins, an
#     abort during the init).
#
# Verdicts (the last line; the exit status):
#   gpu check: PASS (n/n) ...                       0
#   gpu check: FAIL (k of n failed: ...) ...         1
#   gpu check: no GPU driver (...)                  3  every library found and
#   gpu check: no GPU (...)                         3  the backend loaded; no GPU
# Findings are listed in the verdict and in check.json ("status":"finding",
# "held" true or false); they never change it.  Then a table of the ratios
# (GPU vs CPU agreement, ddpbench vs PyTorch) and one of issue 25's goals,
# each judged (met, short, or not measured and why; check.json's "goals"): a
# goal missed is a figure, not a fault, and does not fail the check.
#
# Environment: DDPBENCH_CHECK_OUT (above); BUDGET (seconds, 345); TOL (1e-4);
# CUDA_HOME (/usr/local/cuda); PYTHON (python3); CUDA_VISIBLE_DEVICES is
# respected; JOBS (make -j, tree only); DDPBENCH_CHECK_STEPS (step ids: run
# only those, e.g. a rerun of what a killed check did not reach; the others
# are skipped and named); DDPBENCH_CHECK_EMU=DIR (tree only: the steps on
# the emulated GPU of a `make EMU=1` build in DIR, a rehearsal of the check
# itself, whose figures mean nothing: tests/gpu/rehearse_kill.sh).
# shellcheck disable=SC2086,SC2046,SC2012 # option lists are meant to split; ls counts entries
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
T_START=$(date +%s)
BUDGET=${BUDGET:-345}
TOL=${TOL:-1e-4}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PY=${PYTHON:-python3}
MODE=run
case "${1:-}" in
--dry-run) MODE=dry ;;
--self-test) MODE=selftest ;;
"") ;;
-h | --help) sed -n '2,81p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
*) echo "check.sh: unknown argument '$1' (--dry-run, --self-test)" >&2; exit 2 ;;
esac

# ---- the plan: step, its limit in seconds, what it runs ------------------------------
# Each limit is the step's estimate on one H200 with about a third to a half
# again for a slow box.  A ddpbench process costs CUDA's start-up (1-3 s;
# NCCL's 2-5 s more); the emulator runs the same jobs (tests/cuda_emu/run.sh),
# so the count of processes per step is known, only their GPU time is
# estimated:
#   libraries  ld.so on three files; python3 importing torch once       ~5-10 s
#   probe      the first CUDA start (no persistence daemon: up to 15) ~5-15 s
#   torch      PyTorch once (4 models, the GEMMs alone) ~15-25 s, and 9
#              ddpbench runs: mlp-small, -medium, -large and -large bf16
#              with graphs off and on (mlp-large: 201M parameters made on
#              the host, 20 steps of ~50 ms in fp32), mlp-large ddp   ~50-60 s
#   single     2 GPU runs + 2 CPU references of 20 small steps        ~10-20 s
#   ddp        4 runs (7 with 2 GPUs or more), NCCL or shm each       ~25-40 s
#   suites     test_cuda (a process per test), test_comm_nccl         ~15-25 s
#   faults     3 runs, each ended within 25 s (the stall's --timeout 5) ~20-35 s
#   trace      2 traced runs, 2 --mode comm runs                      ~10-15 s
#   findings   test_comm_nccl's two init-abort tests, one process: an
#              init bound of 3 s, an abort after 1 s, CUDA's start-up  ~6-10 s
# The limits add up to BUDGET (345 s): a machine's start-up (a minute or
# two) and two whole checks, each under its command's limit of 390 s, fit
# in a lease of 15 minutes (docs/gpu.md: the device command).  torch's 110 s
# hold its two new graphs-off runs of mlp-large (100 before) with the
# PyTorch import moved to libraries (10 -> 15); suites gave 5 s to the
# findings' 15 (40 -> 35: the init-abort tests left it), the rest 10 more.
plan() {
    cat <<'EOF'
libraries 15 find cudart, cuBLAS and NCCL for lib/libddpbench-cuda.so (toolkit or python3's nvidia wheels); the PyTorch python3 loads
probe 20 load the CUDA backend and count the GPUs (the first CUDA start)
torch 110 PyTorch eager, then ddpbench with CUDA graphs off and on, GPU 0: mlp-small, mlp-medium, mlp-large, mlp-large bf16 (vs its fp32 and autocast); mlp-large's step vs its GEMMs alone; mlp-large ddp nccl
single 30 single on GPU 0 vs the CPU: small (relu, CE, Adam) and gelu-sgd, 20 steps each
ddp 55 ddp nccl (a rank per GPU), ddp shm --gpus 0,0, dp --gpus 0,0 (graphs on and off), dp nccl graphs on (2+ GPUs) vs the CPU
suites 35 test_cuda and test_comm_nccl (its init-abort tests are findings), one process each
faults 45 NCCL injected error, NCCL killed rank, stalled rank: exit 1, named, no hang
trace 20 --trace single and ddp: spans not zero; --mode comm: every result checked
findings 15 never failing the check: test_comm_nccl's init-abort tests on real NCCL
EOF
}

# issue 25's goals: id|what|comparison|target (check.json's "goals", each
# judged met, short, or not measured with the reason)
goals_plan() {
    cat <<'EOF'
small_vs_torch|mlp-small single, CUDA graphs on / PyTorch eager fp32 (samples/s)|>=|5
medium_vs_torch|mlp-medium single / PyTorch eager fp32 (samples/s)|>=|1.3
large_vs_torch|mlp-large single fp32 / PyTorch eager fp32 (samples/s)|>=|1.0
large_bf16_vs_torch|mlp-large single bf16 / PyTorch bf16 autocast (samples/s)|>=|1.0
large_step_vs_gemms|mlp-large fp32 step / its GEMMs timed alone with cuBLAS (s)|<=|1.15
large_bf16_vs_fp32|mlp-large bf16 / its own fp32 step (samples/s)|>=|5
host_syncs|host syncs per step, CUDA graphs on (the torch step's runs: the most)|<=|1
graph_launches|graph launches per step, CUDA graphs on (the farthest from 1)|==|1
EOF
}

if [ "$MODE" = dry ]; then
    echo "gpu check: the plan (each step with its limit; the whole within BUDGET=${BUDGET}s;"
    echo "a step starts only while the budget lasts, and is cut at its limit or the budget)"
    plan | awk '{ n++; t += $2; l = $2; $1 = sprintf("%3s %-10s", n ".", $1); $2 = sprintf("%4ds", l); print "  " $0 }
        END { printf "  limits add up to %ds; the budget stops the check at %ss\n", t, "'"$BUDGET"'" }'
    echo "goals, each judged in check.json's \"goals\" (one missed does not fail the check):"
    goals_plan | awk -F'|' '{ printf "  %-20s %s %s %s\n", $1, $2, $3, $4 }'
    echo "outputs: \$DDPBENCH_CHECK_OUT (default: results/ beside check.sh in a kit) gets check.json,"
    echo "         check.log and check-logs.tar.gz, nothing else, written as the check goes (a check"
    echo "         killed from outside leaves what it finished; check.json's \"complete\" says whether"
    echo "         it ended); \$OUT only when it is \$DDPBENCH_CHECK_OUT"
    exit 0
fi

# ---- bookkeeping --------------------------------------------------------------------
elapsed() { echo $(($(date +%s) - T_START)); }
left() { echo $((BUDGET - $(elapsed))); }
STEP_END=0
# lim N: N seconds, or what is left of the step and of the budget (at least 1)
lim() {
    now=$(date +%s)
    l=$((STEP_END - now)) b=$((BUDGET - (now - T_START) - 3))
    [ "$b" -lt "$l" ] && l=$b
    [ "$l" -lt "$1" ] || l=$1
    [ "$l" -ge 1 ] || l=1
    echo "$l"
}
jstr() { printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g'; }
safe() { echo "$1" | sed 's/[ ,/:]/_/g'; }
npass=0 nfail=0 nskip=0 nfind=0 failed="" skipped="" found=""
# Each result goes to check.json at once (snapshot): a check killed from
# outside keeps every result it recorded.
record() { # STATUS NAME DETAIL [EXTRA-JSON]
    printf '{"name":"%s","step":"%s","status":"%s","detail":"%s","at_s":%s%s}\n' "$(jstr "$2")" \
        "${STEP:-}" "$1" "$(jstr "$3")" "$(elapsed)" "${4:+,$4}" >>"$RES"
}
pass() { npass=$((npass + 1)); record pass "$1" "$2" "${3:-}"; echo "PASS  $1: $2"; snapshot; }
fail() {
    nfail=$((nfail + 1)); failed="$failed${failed:+, }$1"
    record fail "$1" "$2" "${3:-}"; echo "FAIL  $1: $2"; snapshot
}
skip() {
    nskip=$((nskip + 1)); skipped="$skipped${skipped:+, }$1"
    record skip "$1" "$2" "${3:-}"; echo "SKIP  $1: $2"; snapshot
}
# finding NAME HELD DETAIL [EXTRA-JSON]: what has never met a real NCCL,
# reported apart (HELD: true when it held there, false when not,
# null when it could not be judged); never a failure
finding() {
    nfind=$((nfind + 1)); found="$found${found:+, }$1"
    record finding "$1" "$3" "\"held\":$2${4:+,$4}"
    case "$2" in true) h=held ;; false) h="did not hold" ;; *) h="not judged" ;; esac
    echo "NOTE  $1: $h: $3"; snapshot
}
# no_time NAME NEEDED: skip NAME (and say why) unless NEEDED seconds are left
# in the step and in the budget
no_time() {
    now=$(date +%s)
    if [ $((BUDGET - (now - T_START))) -lt "$2" ]; then
        skip "$1" "out of the time budget (${BUDGET}s)"
        return 0
    fi
    if [ $((STEP_END - now)) -lt "$2" ]; then
        skip "$1" "out of the $STEP step's limit"
        return 0
    fi
    return 1
}
show_tail() { tail -n 8 "$1" 2>/dev/null | sed 's/^/      | /'; }
# ratio LABEL OURS THEIRS RATIO WHAT: a row of the closing table
ratio_row() { printf '%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$5" >>"$RATIOS"; }

# The box's own library path, for python3: the folders found for ddpbench's
# CUDA backend (step 1) are on LD_LIBRARY_PATH for our binaries only;
# PyTorch must load its own wheels' cuBLAS and NCCL, never those (a
# toolkit's of another version first on its path would break its import or
# its GPU, and skip the comparison).
BOX_LD=${LD_LIBRARY_PATH-} BOX_LD_SET=${LD_LIBRARY_PATH+yes}
py() { # COMMAND...: COMMAND (a python3, or a timeout of one) with the box's library path
    if [ "$BOX_LD_SET" = yes ]; then LD_LIBRARY_PATH=$BOX_LD "$@"; else env -u LD_LIBRARY_PATH "$@"; fi
}

# ---- the judgements (pure: --self-test runs them on fixtures) ------------------------
# dur_of NAME-PREFIX FILE: the longest "dur" of the trace's events so named
dur_of() { sed 's/},{/}\n{/g' "$2" | sed -n "s/.*\"name\":\"$1[^\"]*\",.*\"dur\":\([0-9.e+-]*\).*/\\1/p" |
    sort -g | tail -n 1; }
# trace_verdict FILE RANKS: "ok forward F backward B all-reduce A" or "bad ...".
# The phases must take time; the all-reduces must be there under ddp and take
# time only when two ranks or more reduce -- NCCL launches nothing for a
# one-rank sum, so its span may be zero.
trace_verdict() {
    f=$(dur_of forward "$1") b=$(dur_of backward "$1") a=$(dur_of all-reduce "$1")
    awk -v f="${f:-0}" -v b="${b:-0}" -v a="${a:--1}" -v r="$2" 'BEGIN {
        ok = f > 0 && b > 0 && (r == 0 || (r == 1 && a >= 0) || (r >= 2 && a > 0))
        printf "%s forward %s, backward %s%s\n", ok ? "ok" : "bad", f, b,
            r == 0 ? "" : (a < 0 ? ", all-reduce missing" : ", all-reduce " a (r == 1 ? " (one rank: may be 0)" : ""))
    }'
}
# shm_verdict NEED_BYTES FREE_BYTES: "ok" or the reason a run needing that much
# of /dev/shm cannot start
shm_verdict() {
    awk -v n="$1" -v f="$2" 'BEGIN {
        if (f == "") { print "ok"; exit }
        if (n + 0 <= f + 0) print "ok"
        else printf "needs %.0f MiB of /dev/shm (the ranks'"'"' shared area), %.0f MiB free\n", n / 1048576, f / 1048576 }'
}
# shm_free: bytes free in /dev/shm (DDPBENCH_CHECK_SHM_FREE overrides; empty: unknown)
shm_free() {
    if [ -n "${DDPBENCH_CHECK_SHM_FREE:-}" ]; then echo "$DDPBENCH_CHECK_SHM_FREE"; return; fi
    df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 * 1024 }'
}
# nparams LAYERS: the parameter count of an MLP of those widths
nparams() { echo "$1" | tr ',' '\n' | awk 'NR > 1 { n += p * $1 + $1 } { p = $1 } END { print n }'; }
# syncs_ok N MAX: N host synchronisations per step is at most MAX
syncs_ok() { awk -v n="$1" -v m="$2" 'BEGIN { exit !(n != "" && n <= m) }'; }
# goal_verdict FIGURE OP TARGET: "met", "short" or "unmeasured" (no figure)
goal_verdict() {
    awk -v f="$1" -v op="$2" -v t="$3" 'BEGIN {
        if (f == "" || f == "null") { print "unmeasured"; exit }
        f += 0; t += 0
        ok = op == ">=" ? f >= t : op == "<=" ? f <= t : (f - t < 1e-9 && t - f < 1e-9)
        print ok ? "met" : "short" }'
}

if [ "$MODE" = selftest ]; then
    T=${TMPDIR:-/tmp}/ddpbench-check-selftest.$$
    mkdir -p "$T" && trap 'rm -rf "$T"' EXIT
    bad=0
    expect() { # WHAT GOT WANT-PREFIX
        case "$2" in "$3"*) echo "ok    $1: $2" ;; *) echo "WRONG $1: got '$2', want '$3...'"; bad=1 ;; esac
    }
    ev='{"name":"forward","ph":"X","ts":1,"dur":%s},{"name":"backward","ph":"X","ts":2,"dur":%s}'
    { printf '{"traceEvents":['; printf "$ev" 120.5 240; printf ',{"name":"all-reduce bucket 0","ph":"X","ts":3,"dur":0}]}\n'; } >"$T/one.json"
    { printf '{"traceEvents":['; printf "$ev" 120.5 240; printf ',{"name":"all-reduce bucket 0","ph":"X","ts":3,"dur":35}]}\n'; } >"$T/two.json"
    { printf '{"traceEvents":['; printf "$ev" 0 240; printf ']}\n'; } >"$T/zero.json"
    { printf '{"traceEvents":['; printf "$ev" 3 4; printf ']}\n'; } >"$T/none.json"
    expect "one-rank ddp trace, zero-length all-reduce" "$(trace_verdict "$T/one.json" 1)" "ok forward 120.5, backward 240, all-reduce 0"
    expect "two-rank ddp trace, zero-length all-reduce" "$(trace_verdict "$T/one.json" 2)" "bad"
    expect "two-rank ddp trace" "$(trace_verdict "$T/two.json" 2)" "ok"
    expect "a zero forward span" "$(trace_verdict "$T/zero.json" 0)" "bad"
    expect "ddp trace without all-reduces" "$(trace_verdict "$T/none.json" 1)" "bad"
    expect "single trace" "$(trace_verdict "$T/none.json" 0)" "ok"
    np=$(nparams 4096,8192,8192,8192,4096)
    expect "mlp-large's parameters" "$np" "201355264"
    expect "mlp-large ddp on a 64 MiB /dev/shm" "$(shm_verdict $((np * 4)) $((64 * 1048576)))" "needs 768 MiB of /dev/shm"
    expect "mlp-large ddp on a 64 GiB /dev/shm" "$(shm_verdict $((np * 4)) $((64 * 1073741824)))" "ok"
    expect "/dev/shm's size overridden" "$(DDPBENCH_CHECK_SHM_FREE=123 shm_free)" "123"
    syncs_ok 1 1 && r=ok || r=bad; expect "1 host sync per step, at most 1" "$r" "ok"
    syncs_ok 2 1 && r=ok || r=bad; expect "2 host syncs per step, at most 1" "$r" "bad"
    syncs_ok "" 1 && r=ok || r=bad; expect "no host sync figure" "$r" "bad"
    expect "5.2x against a goal of >= 5" "$(goal_verdict 5.2 '>=' 5)" "met"
    expect "4.9x against a goal of >= 5" "$(goal_verdict 4.9 '>=' 5)" "short"
    expect "a step 1.2x its GEMMs, goal <= 1.15" "$(goal_verdict 1.2 '<=' 1.15)" "short"
    expect "1 graph launch per step, goal == 1" "$(goal_verdict 1 '==' 1)" "met"
    expect "0.98 graph launches per step, goal == 1" "$(goal_verdict 0.98 '==' 1)" "short"
    expect "a goal without its figure" "$(goal_verdict '' '>=' 1)" "unmeasured"
    [ "$(goals_plan | wc -l)" -eq 8 ] && r=ok || r=bad
    expect "issue 25's eight goals in the plan" "$r" "ok"
    # python3 never sees the library path made for ddpbench (py)
    expect "python3 with the box's unset library path" \
        "$(LD_LIBRARY_PATH=/found BOX_LD_SET='' py sh -c 'echo "${LD_LIBRARY_PATH-unset}"')" "unset"
    expect "python3 with the box's own library path" \
        "$(LD_LIBRARY_PATH=/found BOX_LD=/box BOX_LD_SET=yes py sh -c 'echo "${LD_LIBRARY_PATH-unset}"')" "/box"
    sum=$(plan | awk '{ t += $2 } END { print t }')
    [ "$sum" -le "$BUDGET" ] && r=ok || r=bad
    expect "the steps' limits (${sum}s) within BUDGET (${BUDGET}s)" "$r" "ok"
    [ "$bad" = 0 ] && echo "check.sh --self-test: passed" || echo "check.sh --self-test: FAILED"
    exit "$bad"
fi

# ---- where things are ---------------------------------------------------------------
for id in ${DDPBENCH_CHECK_STEPS:-}; do
    case " $(plan | awk '$1 != "libraries" && $1 != "probe" { printf "%s ", $1 }')" in *" $id "*) ;; *)
        echo "check.sh: DDPBENCH_CHECK_STEPS: no step '$id' to choose ($(plan | awk 'NR > 2 { printf "%s ", $1 }')-- libraries and probe always run)" >&2
        exit 2 ;;
    esac
done
EMU=""
if [ -x "$HERE/ddpbench" ] && [ -d "$HERE/lib" ]; then
    KIT=yes
    cd "$HERE" || exit 1
    BIN=$HERE/ddpbench
    BACKEND=$HERE/lib/libddpbench-cuda.so
    SUITES="$HERE/tests/test_cuda $HERE/tests/test_comm_nccl"
    TORCH_REF=$HERE/torch_ref.py
    CHECK_OUT=${DDPBENCH_CHECK_OUT:-$HERE/results}
else
    KIT=no
    cd "$HERE/../.." || exit 1
    BIN=$(pwd)/ddpbench
    BACKEND=$(pwd)/libddpbench-cuda.so
    SUITES="$(pwd)/build/release/tests/unit/test_cuda $(pwd)/build/release/tests/gpu/test_comm_nccl"
    TORCH_REF=$(pwd)/tests/gpu/torch_ref.py
    CHECK_OUT=${DDPBENCH_CHECK_OUT:-build/gpu-check}
    if [ -n "${DDPBENCH_CHECK_EMU:-}" ]; then
        # the emulated GPU's build (make EMU=1): its CUDA code is linked in
        EMU=$(cd "$DDPBENCH_CHECK_EMU" 2>/dev/null && pwd) ||
            { echo "check.sh: DDPBENCH_CHECK_EMU=$DDPBENCH_CHECK_EMU: no such folder" >&2; exit 2; }
        BIN=$EMU/ddpbench BACKEND=""
        SUITES="$EMU/tests/unit/test_cuda $EMU/tests/gpu/test_comm_nccl"
    fi
fi
mkdir -p "$CHECK_OUT" || exit 1
CHECK_OUT=$(cd "$CHECK_OUT" && pwd)
rm -f "$CHECK_OUT/check.json" "$CHECK_OUT/check-logs.tar.gz" "$CHECK_OUT/check.log"
# Everything else -- logs, data, traces -- lives in a scratch folder that
# goes away; the logs leave it as one archive.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ddpbench-check.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
# What the check prints goes to check.log too, line by line as it is
# printed (a tee behind a FIFO: the check's own exit status stands), so a
# check killed from outside leaves its log up to the kill.
TEE_PID=""
if command -v mkfifo >/dev/null 2>&1 && command -v tee >/dev/null 2>&1 && mkfifo "$WORK/out.fifo"; then
    tee "$CHECK_OUT/check.log" <"$WORK/out.fifo" &
    TEE_PID=$!
    exec >"$WORK/out.fifo" 2>&1
    rm -f "$WORK/out.fifo"
else
    echo "      (no mkfifo or tee here: no check.log)"
fi
L=$WORK/logs
mkdir -p "$L"
RES=$WORK/results.jsonl RATIOS=$WORK/ratios GOALFIG=$WORK/goals
: >"$RES"
: >"$RATIOS"
: >"$GOALFIG"
# goal ID FIGURE DETAIL: a goal's figure (empty: not measured, DETAIL says why)
goal() { printf '%s|%s|%s\n' "$1" "$2" "$3" >>"$GOALFIG"; }
ENV_JSON="{}"
LIBS_JSON="{}"
TORCH_JSON="null"

# ---- the end: check.json, the log archive, the table, the verdict ---------------------
archive() {
    # Logs are small; a runaway one keeps its head and tail.
    for f in "$L"/*; do
        [ -f "$f" ] || continue
        if [ "$(wc -c <"$f")" -gt 1048576 ]; then
            { head -c 262144 "$f"; printf '\n[... cut ...]\n'; tail -c 262144 "$f"; } >"$f.cut" && mv "$f.cut" "$f"
        fi
    done
    if command -v tar >/dev/null 2>&1 && command -v gzip >/dev/null 2>&1; then
        (cd "$WORK" && tar -cf - logs | gzip -9 >"$CHECK_OUT/check-logs.tar.gz.tmp") &&
            mv "$CHECK_OUT/check-logs.tar.gz.tmp" "$CHECK_OUT/check-logs.tar.gz"
    elif [ -z "${NO_ARCHIVE_SAID:-}" ]; then
        NO_ARCHIVE_SAID=1
        echo "      (no tar or gzip here: no log archive)"
    fi
}
print_goals() {
    [ -s "$GOALFIG" ] || return 0
    printf '      %-74s %7s %7s  %s\n' "issue 25's goals" "figure" "want" ""
    goals_plan | while IFS='|' read -r id what op target; do
        line=$(grep "^$id|" "$GOALFIG" | tail -n 1)
        fig=$(echo "$line" | cut -d'|' -f2) det=$(echo "$line" | cut -d'|' -f3-)
        v=$(goal_verdict "$fig" "$op" "$target")
        printf '      %-74s %7s %7s  %s\n' "$what" "${fig:--}" "$op $target" "$v${det:+: $det}"
    done
}
print_table() {
    [ -s "$RATIOS" ] || return 0
    printf '      %-52s %11s %11s %9s  %s\n' "ratios" "ddpbench" "against" "ratio" ""
    while IFS='|' read -r label ours theirs r what; do
        printf '      %-52s %11s %11s %9s  %s\n' "$label" "${ours:--}" "${theirs:--}" "$r" "$what"
    done <"$RATIOS"
}
# write_json COMPLETE OK EXIT VERDICT: check.json, whole, renamed into place
# (COMPLETE false: the check is under way, OK and EXIT null)
write_json() {
    {
        printf '{"tool":"ddpbench gpu check","kit":%s,"emulated":%s,"complete":%s,"ok":%s,"exit":%s,"verdict":"%s","seconds":%s,"budget_s":%s,' \
            "$([ "$KIT" = yes ] && echo true || echo false)" "$([ -n "$EMU" ] && echo true || echo false)" \
            "$1" "$2" "$3" "$(jstr "$4")" "$(elapsed)" "$BUDGET"
        printf '"step":"%s","passed":%s,"failed":%s,"skipped":%s,"findings":%s,"libraries":%s,"torch":%s,"environment":%s,"ratios":[' \
            "${STEP:-}" "$npass" "$nfail" "$nskip" "$nfind" "$LIBS_JSON" "$TORCH_JSON" "$ENV_JSON"
        sep=""
        while IFS='|' read -r label ours theirs r what; do
            printf '%s{"name":"%s","ddpbench":%s,"against":%s,"ratio":%s,"what":"%s"}' "$sep" "$(jstr "$label")" \
                "${ours:-null}" "${theirs:-null}" "${r:-null}" "$(jstr "$what")"
            sep=","
        done <"$RATIOS"
        printf '],"goals":['
        sep=""
        goals_plan | while IFS='|' read -r id what op target; do
            line=$(grep "^$id|" "$GOALFIG" 2>/dev/null | tail -n 1)
            fig=$(echo "$line" | cut -d'|' -f2) det=$(echo "$line" | cut -d'|' -f3-)
            v=$(goal_verdict "$fig" "$op" "$target")
            [ "$v" = unmeasured ] && [ -z "$det" ] && det="not reached in this check"
            case "$v" in met) met=true ;; short) met=false ;; *) met=null ;; esac
            printf '%s{"id":"%s","goal":"%s","figure":%s,"want":"%s %s","met":%s,"verdict":"%s","detail":"%s"}' \
                "$sep" "$id" "$(jstr "$what")" "${fig:-null}" "$op" "$target" "$met" "$v" "$(jstr "$det")"
            sep=","
        done
        printf '],"results":['
        sep=""
        while IFS= read -r line; do printf '%s%s' "$sep" "$line"; sep=","; done <"$RES"
        printf ']}\n'
    } >"$CHECK_OUT/check.json.tmp" && mv "$CHECK_OUT/check.json.tmp" "$CHECK_OUT/check.json"
}
# check.json as the check stands now (after every result)
snapshot() {
    write_json false null null "gpu check: under way: step ${STEP:-?} ($npass passed, $nfail failed, $nskip skipped, $nfind findings so far)"
}
finish() { # [VERDICT EXIT]: a verdict of its own (no GPU), else PASS or FAIL
    secs=$(elapsed)
    total=$((npass + nfail))
    extra=""
    [ "$nskip" -gt 0 ] && extra="; $nskip skipped: $skipped"
    [ "$nfind" -gt 0 ] && extra="$extra; $nfind findings: $found"
    [ -n "$EMU" ] && extra="$extra; on the emulated GPU: its figures mean nothing"
    if [ $# -ge 2 ]; then
        verdict="$1 in ${secs}s" status=$2 ok=false
    elif [ "$nfail" -eq 0 ] && [ "$total" -gt 0 ]; then
        verdict="gpu check: PASS ($npass/$total$extra) in ${secs}s" status=0 ok=true
    else
        verdict="gpu check: FAIL ($nfail of $total failed: $failed$extra) in ${secs}s" status=1 ok=false
    fi
    write_json true "$ok" "$status" "$verdict"
    cp "$CHECK_OUT/check.json" "$L/check.json" 2>/dev/null
    archive
    print_table
    print_goals
    echo "      (in $CHECK_OUT: check.json, check.log, check-logs.tar.gz)"
    echo "$verdict"
    if [ -n "$TEE_PID" ]; then # the last lines through the tee before the exit
        exec >&- 2>&-
        wait "$TEE_PID"
    fi
    exit "$status"
}
abort() { fail "$1" "$2"; finish; }

# ---- 0. build (source tree only) ----------------------------------------------------
if [ "$KIT" = no ] && [ -z "$EMU" ]; then
    STEP=build STEP_END=$(($(date +%s) + 3600))
    echo "== build (make)"
    if ! make -j"${JOBS:-$(nproc 2>/dev/null || echo 2)}" ddpbench build/release/tests/unit/test_cuda \
        build/release/tests/gpu/test_comm_nccl >"$L/build.log" 2>&1; then
        show_tail "$L/build.log"
        abort build "make failed"
    fi
    grep -q 'HAVE_NCCL' build/release/flags.txt 2>/dev/null ||
        abort build "the build has no CUDA or no NCCL (is nvcc at \$CUDA_HOME/bin/nvcc, nccl.h installed?)"
    pass build "CUDA and NCCL built in"
    T_START=$(date +%s) # the budget is the check's, not the build's
fi

# step ID: begin step ID with its limit from the plan; false when the budget is spent
step() {
    STEP=$1
    s=$(plan | awk -v id="$1" '$1 == id { print $2 }')
    STEP_END=$(($(date +%s) + s))
    archive # the steps before, should this one be killed
    snapshot
    echo "== $(plan | awk -v id="$1" '$1 == id { $2 = "(" $2 " s)"; print }')"
}
# want ID: whether step ID runs (DDPBENCH_CHECK_STEPS names those that do;
# unset, all); one that does not is skipped and named
want() {
    case " ${DDPBENCH_CHECK_STEPS:-$1} " in *" $1 "*) return 0 ;; esac
    STEP=$1
    skip "$1" "not asked for (DDPBENCH_CHECK_STEPS=$DDPBENCH_CHECK_STEPS)"
    return 1
}

# ---- 1. libraries -------------------------------------------------------------------
# The dynamic loader itself lists what a file needs (ldd is a bash script some
# boxes lack); "X => not found" is what neither the run paths, LD_LIBRARY_PATH
# nor the ld.so cache provide.
LDSO=""
for f in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1 /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2; do
    [ -x "$f" ] && { LDSO=$f; break; }
done
list_needs() { # FILE: ld.so's list (ldd's format)
    if [ -n "$LDSO" ]; then "$LDSO" --list "$1" 2>&1; else ldd "$1" 2>&1; fi
}
# What FILE needs and does not find: ld.so writes "X => not found" for each
# such library of a program, but for a shared library it stops at the first
# with "error while loading shared libraries: X: cannot open shared object
# file" -- so the search below goes round until nothing more is missing.
missing() {
    list_needs "$1" | sed -n -e 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p' \
        -e 's/.*error while loading shared libraries: \([^:]*\): cannot open.*/\1/p' | sort -u
}
resolved() { # FILE SONAME-PREFIX: the path it resolves to
    list_needs "$1" | sed -n "s/^[[:space:]]*$2[^ ]* => \\(\\/[^ ]*\\).*/\\1/p" | head -n 1
}
# The python3s' site-packages (PyTorch's nvidia-* wheels put cuBLAS, cudart
# and NCCL in site-packages/nvidia/<name>/lib, CUDA 13's in nvidia/cu13/lib).
site_dirs() {
    for p in $PY; do
        command -v "$p" >/dev/null 2>&1 || continue
        timeout 20 "$p" -c 'import site
d = list(site.getsitepackages()) + [site.getusersitepackages()]
try:
    import nvidia, os
    d += [os.path.dirname(p) for p in nvidia.__path__]
except Exception:
    pass
print("\n".join(d))' 2>/dev/null
    done | awk '!seen[$0]++'
}
SITE_DIRS=""
lib_dirs() { # the folders to look in, in order: the toolkit, the wheels, the system's
    for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib" \
        /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib; do
        [ -d "$d" ] && echo "$d"
    done
    for s in $SITE_DIRS; do
        for d in "$s"/nvidia/*/lib "$s"/torch/lib; do [ -d "$d" ] && echo "$d"; done
    done
    for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do [ -d "$d" ] && echo "$d"; done
}
find_lib() { # SONAME -> the first folder holding it
    for d in $(lib_dirs); do
        [ -e "$d/$1" ] && { echo "$d"; return 0; }
    done
    return 1
}
add_path() {
    case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) return 1 ;; esac
    LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
}
origin() {
    case "$1" in
    "") echo "not found" ;;
    *site-packages* | *dist-packages*) echo "python3's wheel" ;;
    "$HERE"/lib/*) echo "the kit" ;;
    /usr/local/cuda*) echo "the toolkit" ;;
    *) echo "the system" ;;
    esac
}

step libraries
if [ -n "$EMU" ]; then
    [ -x "$BIN" ] || abort libraries "$BIN is missing (make EMU=1 first)"
    skip libraries "the emulated GPU: its CUDA code is linked into $BIN"
else
for b in "$BIN" "$BACKEND" $SUITES; do
    [ -e "$b" ] || abort libraries "$b is missing"
done
SITE_DIRS=$(site_dirs)
# Until nothing more is found: a library found may need another (cuBLAS needs
# cuBLASLt), and ld.so names a shared library's missing needs one at a time.
added=""
for _ in 1 2 3 4 5 6 7 8; do
    more=no
    for b in "$BACKEND" "$BIN" $SUITES; do
        for so in $(missing "$b"); do
            d=$(find_lib "$so") || continue
            add_path "$d" && { more=yes; added="$added $so:$d"; }
        done
    done
    [ "$more" = yes ] || break
done
left_over=""
for b in "$BACKEND" "$BIN" $SUITES; do left_over="$left_over $(missing "$b")"; done
# ld.so names only the first missing need of a shared library: the kit lists
# them all (lib/libddpbench-cuda.needs, from the build), so every one that is
# neither resolved nor found is named at once.
if [ -n "$(echo $left_over)" ] && [ -f "${BACKEND%.so}.needs" ]; then
    got=$(list_needs "$BACKEND")
    for so in $(cat "${BACKEND%.so}.needs"); do
        case "$got" in *"$so => /"*) continue ;; esac
        find_lib "$so" >/dev/null || left_over="$left_over $so"
    done
fi
left_over=$(echo $left_over | tr ' ' '\n' | sort -u | tr '\n' ' ')
{
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} (ours; python3 runs with the box's: ${BOX_LD_SET:+$BOX_LD}${BOX_LD_SET:-unset})"
    echo "python3 site-packages: $(echo $SITE_DIRS)"
    echo "searched: $(lib_dirs | tr '\n' ' ')"
    for b in "$BACKEND" "$BIN" $SUITES; do echo "== $b"; list_needs "$b"; done
} >"$L/libraries.log" 2>&1
if [ -n "${left_over% }" ]; then
    abort libraries "not found anywhere: ${left_over% } (looked in: $(lib_dirs | tr '\n' ' ')-- the toolkit at CUDA_HOME=$CUDA_HOME? a python3 with PyTorch's nvidia wheels?)"
fi
NCCL_SO=$(resolved "$BACKEND" libnccl.so) CUBLAS_SO=$(resolved "$BACKEND" libcublas.so)
CUBLASLT_SO=$(resolved "$BACKEND" libcublasLt.so) CUDART_SO=$(resolved "$BACKEND" libcudart.so)
DRIVER_SO=$(ldconfig -p 2>/dev/null | sed -n 's/.*libcuda\.so\.1 .*=> \(.*\)/\1/p' | head -n 1)
LIBS_JSON=$(printf '{"nccl":"%s","nccl_from":"%s","cublas":"%s","cublas_from":"%s","cublaslt":"%s","cudart":"%s","cudart_from":"%s","driver":"%s","ld_library_path":"%s"}' \
    "$(jstr "$NCCL_SO")" "$(origin "$NCCL_SO")" "$(jstr "$CUBLAS_SO")" "$(origin "$CUBLAS_SO")" \
    "$(jstr "$CUBLASLT_SO")" "$(jstr "$CUDART_SO")" "$(origin "$CUDART_SO")" "$(jstr "$DRIVER_SO")" \
    "$(jstr "${LD_LIBRARY_PATH:-}")")
for need in "$NCCL_SO:NCCL" "$CUBLAS_SO:cuBLAS" "$CUDART_SO:cudart"; do
    [ -n "${need%:*}" ] || abort libraries "lib/libddpbench-cuda.so does not link ${need#*:} (a kit built without it?)"
done
pass libraries "NCCL $NCCL_SO ($(origin "$NCCL_SO")); cuBLAS $CUBLAS_SO ($(origin "$CUBLAS_SO")); cudart $CUDART_SO ($(origin "$CUDART_SO")); driver ${DRIVER_SO:-libcuda.so.1 (not in the ld.so cache)}${added:+; on LD_LIBRARY_PATH for:$added}"
command -v nvidia-smi >/dev/null 2>&1 &&
    timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,persistence_mode --format=csv,noheader 2>/dev/null |
    sed 's/^/      gpu /'
fi
# Which PyTorch the python3 brings, whether it sees a GPU, and which cuBLAS,
# cudart and NCCL it loads (/proc/self/maps), with the box's own library path
# (py): the folders found above are for our binaries, never for PyTorch.
HAVE_TORCH=no
if command -v "$PY" >/dev/null 2>&1; then
    py timeout "$(lim 14)" "$PY" -c 'import json, os, sys
try:
    import torch
except Exception as e:
    print("TORCH " + json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
    sys.exit(0)
def loaded(name):
    with open("/proc/self/maps") as f:
        return sorted({l.split()[-1] for l in f if "/" + name in l and l.split()[-1].startswith("/")})
gpu = torch.cuda.is_available()
if gpu and not loaded("libcublas.so"):  # loaded on first use by some builds
    (torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")).sum().item()
try:
    nccl = ".".join(str(v) for v in torch.cuda.nccl.version()) if gpu else None
except Exception:
    nccl = None
print("TORCH " + json.dumps({"version": torch.__version__, "cuda": torch.version.cuda, "gpu": gpu,
      "nccl_version": nccl, "cublas": loaded("libcublas.so"), "cudart": loaded("libcudart.so"),
      "nccl": loaded("libnccl.so"), "ld_library_path": os.environ.get("LD_LIBRARY_PATH")}))' \
        >"$L/torch-import.log" 2>&1
    tj=$(sed -n 's/^TORCH //p' "$L/torch-import.log" | tail -n 1)
    case "$tj" in
    '{"version"'*)
        TORCH_JSON=$tj
        case "$tj" in *'"gpu": true'*) HAVE_TORCH=yes ;; esac
        echo "      python3: torch $(echo "$tj" | sed -n 's/.*"version": "\([^"]*\)".*/\1/p'), GPU $HAVE_TORCH; it loads cuBLAS $(echo "$tj" | sed -n 's/.*"cublas": \[\([^]]*\)\].*/\1/p'), NCCL $(echo "$tj" | sed -n 's/.*"nccl": \[\([^]]*\)\].*/\1/p')" ;;
    *) err=$(echo "$tj" | sed -n 's/.*"error": "\([^"]*\)".*/\1/p')
        [ -n "$err" ] || err=$(tail -n 1 "$L/torch-import.log")
        TORCH_JSON="{\"error\":\"$(jstr "${err:-no answer}")\"}"
        echo "      python3: no PyTorch (${err:-no answer})" ;;
    esac
else
    echo "      no $PY here: no PyTorch comparison"
fi

# ---- 2. the probe: the backend loads, the GPUs as ddpbench sees them ---------------------
step probe
timeout "$(lim 45)" "$BIN" --mode single --backend auto --steps 1 --samples 64 --batch 32 --layers 4,4 \
    --loss mse --json >"$L/probe.json" 2>"$L/probe.log"
NGPU=$(sed -n 's/.*(auto: \([0-9][0-9]*\) GPUs\{0,1\} visible).*/\1/p' "$L/probe.log" | head -n 1)
if [ -z "$NGPU" ]; then
    why=$(sed -n 's/.*(auto: no GPU, \(.*\)), devices.*/\1/p' "$L/probe.log" | head -n 1)
    case "$why" in
    *"cannot load the CUDA backend"*) abort probe "$why" ;;
    *"driver too old"*)
        skip probe "$why"
        finish "gpu check: ${why%% (cudaError*}; docs/gpu.md says how to build the kit for this box's CUDA" 3 ;;
    *InsufficientDriver* | *"no CUDA driver"*)
        skip probe "$why"
        finish "gpu check: no GPU driver ($why; every library was found and the CUDA backend loaded)" 3 ;;
    *NoDevice* | *"no CUDA device"*)
        skip probe "$why"
        finish "gpu check: no GPU ($why; every library was found and the CUDA backend loaded)" 3 ;;
    *) show_tail "$L/probe.log"; abort probe "no GPU visible: ${why:-ddpbench did not say why}" ;;
    esac
fi
ENV_JSON=$(sed -n 's/.*"environment":\({.*}\),"steps":.*/\1/p' "$L/probe.json")
[ -n "$ENV_JSON" ] || ENV_JSON="{}"
names=$(sed -n 's/.*"gpus":\[\([^]]*\)\].*/\1/p' "$L/probe.json" | grep -o '"name":"[^"]*"' |
    cut -d'"' -f4 | sort | uniq -c | sed 's/^ *\([0-9]*\) /\1 x /' | tr '\n' ';')
pass probe "$NGPU GPU(s) visible${CUDA_VISIBLE_DEVICES+ (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)}: ${names%;}"
ALL=$(i=0; l=""; while [ "$i" -lt "$NGPU" ]; do l="$l${l:+,}$i"; i=$((i + 1)); done; echo "$l")

# ---- the runs: ddpbench's outputs and how steps 3-5 judge them ------------------------------
# From --json: checksum sum and |sum|, and host_syncs_per_step (the run's: the
# last key of that name, after the devices').
sums() { sed -n 's/.*"checksum":{"sum":\([^,]*\),"abs_sum":\([^,]*\),.*/\1 \2/p' "$1"; }
syncs() { sed -n 's/.*"host_syncs_per_step":\([^,}]*\).*/\1/p' "$1"; }
tput() { sed -n 's/.*"throughput_samples_per_s":\([^,]*\),.*/\1/p' "$1"; }
# the run's launches_per_step (the last key of that name) and its graph launches
launches() { sed -n 's/.*"launches_per_step":\([^,}]*\).*/\1/p' "$1"; }
glaunches() { sed -n 's/.*"graphs":\([^,}]*\).*/\1/p' "$1"; }
cfg_args() {
    case "$1" in
    small) echo "--layers 32,128,128,10 --act relu --loss ce --dataset classes --optim adam --lr 0.001 --samples 4096" ;;
    gelu-sgd) echo "--layers 64,256,256,8 --act gelu --loss mse --optim sgd --lr 0.01 --momentum 0.9 --samples 4096" ;;
    esac
}
# run LIMIT LOG ARGS...: ddpbench with a time limit; its exit status (124: timed out)
run() {
    rl=$1 log=$2
    shift 2
    timeout "$rl" "$BIN" "$@" >"$log" 2>"$log.err"
    rc=$?
    [ "$rc" -eq 124 ] && echo "ddpbench: timed out after ${rl}s" >>"$log.err"
    return "$rc"
}
cpu_ref() { # CFG BATCH -> "sum abs"
    ref="$L/cpu-$1-b$2.json"
    if [ ! -s "$ref" ] || [ -z "$(sums "$ref")" ]; then
        run "$(lim 30)" "$ref" --mode single --backend cpu --threads "$(nproc 2>/dev/null || echo 2)" \
            --steps 20 --batch "$2" $(cfg_args "$1") --json || return 1
    fi
    sums "$ref"
}
# compare LABEL CFG BATCH MAX-SYNCS ARGS...: the GPU run's parameters against
# the CPU's within TOL, and at most MAX-SYNCS host synchronisations per step
compare() {
    label=$1 cfg=$2 batch=$3 maxs=$4
    shift 4
    no_time "$label" 8 && return
    log="$L/$(safe "$label").json"
    if ! run "$(lim 30)" "$log" --steps 20 --batch "$batch" $(cfg_args "$cfg") --backend cuda --json "$@"; then
        show_tail "$log.err"
        fail "$label" "run failed: $(tail -n 1 "$log.err")"
        return
    fi
    ref=$(cpu_ref "$cfg" "$batch") || { fail "$label" "the CPU reference run failed"; return; }
    got=$(sums "$log")
    n=$(syncs "$log")
    verdict=$(echo "$ref $got $TOL" | awk '{
        d1 = $1 - $3; if (d1 < 0) d1 = -d1
        d2 = $2 - $4; if (d2 < 0) d2 = -d2
        s = $2 > 0 ? $2 : 1; r = (d1 > d2 ? d1 : d2) / s
        printf "%s %.2e", (r <= $5 ? "ok" : "bad"), r }')
    r=${verdict#* }
    extra="\"rel_diff\":$r,\"host_syncs_per_step\":${n:-null}"
    ratio_row "$label: parameters vs the CPU" "" "" "$r" "relative difference (at most $TOL)"
    case "$verdict" in
    ok*) if syncs_ok "$n" "$maxs"; then
             pass "$label" "$r from the CPU, $n host sync(s) per step" "$extra"
         else
             fail "$label" "the host waited for the GPU $n times per step (at most $maxs)" "$extra"
         fi ;;
    *) fail "$label" "parameters differ from the CPU by $r > $TOL" "$extra" ;;
    esac
}
# gain ON OFF WHAT: a closing-table row, the throughput of ON's run over OFF's
# (two compare labels that both ran)
gain() {
    on=$(tput "$L/$(safe "$1").json" 2>/dev/null) off=$(tput "$L/$(safe "$2").json" 2>/dev/null)
    [ -n "$on" ] && [ -n "$off" ] || return 0
    ratio_row "$3" "$on" "$off" "$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" \
        "samples/s"
}
W=$NGPU
[ "$W" -lt 2 ] && W=2
B=$((32 * W)) # divisible by every world size used below
# model -> "layers|act|loss|optimizer options|batch|steps|warm-up|data": the
# presets' values; mlp-small on its own synthetic classes, the larger two on
# random .npy files (their synthetic teachers take minutes on one core; the
# throughput does not depend on the values).
model_args() {
    case "$1" in
    mlp-small) echo "64,512,512,10|gelu|ce|--optim adam --lr 0.003|256|60|10|synthetic" ;;
    mlp-medium) echo "1024,2048,2048,1024|relu|mse|--optim sgd --lr 0.01 --momentum 0.9|256|60|10|npy" ;;
    mlp-large) echo "4096,8192,8192,8192,4096|gelu|mse|--optim adamw --lr 0.0001|2048|20|4|npy" ;;
    esac
}
field() { echo "$1" | cut -d'|' -f"$2"; }
write_npy() { # FILE ROWS COLS SEED: float32 uniform(-1, 1), C order
    if command -v "$PY" >/dev/null 2>&1 && py timeout 30 "$PY" -c 'import numpy' 2>/dev/null; then
        py timeout 60 "$PY" -c 'import sys, numpy as np
f, r, c, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
np.save(f, np.random.default_rng(s).uniform(-1, 1, (r, c)).astype("<f4"))' "$@"
        return
    fi
    command -v perl >/dev/null 2>&1 || return 1
    perl -e '
        my ($f, $r, $c, $seed) = @ARGV;
        srand($seed);
        my $d = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: ($r, $c), }";
        my $pad = 64 - ((10 + length($d) + 1) % 64);
        $pad = 0 if $pad == 64;
        $d .= " " x $pad . "\n";
        open(my $fh, ">:raw", $f) or die "$f: $!";
        print $fh "\x93NUMPY\x01\x00" . pack("v", length($d)) . $d;
        for (my $i = 0; $i < $r; $i++) { print $fh pack("f<*", map { rand(2) - 1 } 1 .. $c); }
        close($fh) or die "$f: $!";' "$@"
}
NPY_ROWS=2048 # one mlp-large batch; the epochs wrap around it
data_args() { # MODEL: ddpbench's data options for it ("" when they cannot be made)
    m=$(model_args "$1")
    if [ "$(field "$m" 8)" = synthetic ]; then echo "--samples 4096"; return 0; fi
    layers=$(field "$m" 1)
    cin=$(echo "$layers" | cut -d, -f1) cout=$(echo "$layers" | tr ',' '\n' | tail -n 1)
    x=$WORK/$1-x.npy y=$WORK/$1-y.npy
    { [ -s "$x" ] || write_npy "$x" "$NPY_ROWS" "$cin" 1; } && { [ -s "$y" ] || write_npy "$y" "$NPY_ROWS" "$cout" 2; } ||
        return 1
    echo "--data $x --targets $y"
}
# ours MODEL MODE GPUS LABEL [ARGS...]: ddpbench's samples/s in OURS (false,
# and the failure recorded, when the run fails; not in a subshell: fail counts)
ours() {
    model=$1 mode=$2 gpus=$3 label=$4 OURS=""
    shift 4
    m=$(model_args "$model")
    d=$(data_args "$model") || { fail "$label" "cannot write the .npy data (no numpy, no perl)"; return 1; }
    log="$L/tput-$(safe "$label").json"
    if ! run "$(lim 45)" "$log" --backend cuda --model "$model" $d --batch "$(field "$m" 5)" \
        --steps "$(field "$m" 6)" --warmup-steps "$(field "$m" 7)" --mode "$mode" --gpus "$gpus" --json "$@"; then
        show_tail "$log.err"
        fail "$label" "run failed: $(tail -n 1 "$log.err")"
        return 1
    fi
    OURS=$(tput "$log")
    [ -n "$OURS" ] || { fail "$label" "no throughput in its --json"; return 1; }
}

# ---- 3. ddpbench against PyTorch eager on the same GPU ------------------------------------
# Early, and each case with CUDA graphs off and on: a graph step that fails
# loses only the graphs-on figure.  The cases: mlp-small, mlp-medium and
# mlp-large in fp32 (TF32 off), mlp-large in bf16 (PyTorch: autocast).
TORCH_CASES="mlp-small mlp-medium mlp-large mlp-large-bf16"
case_model() { echo "${1%-bf16}"; }
case_prec() { case "$1" in *-bf16) echo bf16 ;; *) echo fp32 ;; esac; }
OURSF=$WORK/ours # "CASE GRAPHS SAMPLES/S" per ddpbench run that finished
: >"$OURSF"
ours_of() { awk -v c="$1" -v g="$2" '$1 == c && $2 == g { v = $3 } END { print v }' "$OURSF"; }
# jfield NAME KEY: a number of torch_ref.py's line for case NAME
jfield() { grep "\"name\": *\"$1\"" "$L/torch.jsonl" 2>/dev/null | sed -n "s/.*\"$2\": *\([0-9.e+-]*\).*/\\1/p"; }
if want torch; then
step torch
# PyTorch first, once for every case (one import, one CUDA start): a line of
# torch_ref.py options per case, a JSON line back per case; with the box's
# own library path (py), so it loads its own cuBLAS and NCCL.
: >"$WORK/torch-cases"
for model in mlp-small mlp-medium mlp-large; do
    m=$(model_args "$model")
    g=""
    [ "$model" = mlp-large ] && g=" --gemms" # its step against its GEMMs timed alone
    echo "--name $model --layers $(field "$m" 1) --act $(field "$m" 2) --loss $(field "$m" 3) $(field "$m" 4) --batch $(field "$m" 5) --steps $(field "$m" 6) --warmup $(field "$m" 7) --samples $NPY_ROWS --device 0$g" >>"$WORK/torch-cases"
done
# mlp-large again under PyTorch's bf16 autocast, beside ddpbench's --precision bf16
echo "$(tail -n 1 "$WORK/torch-cases" | sed 's/--name mlp-large/--name mlp-large-bf16/') --precision bf16" >>"$WORK/torch-cases"
cp "$WORK/torch-cases" "$L/torch-cases"
if [ "$HAVE_TORCH" = yes ] && ! no_time "PyTorch eager" 20; then
    py timeout "$(lim 60)" "$PY" "$TORCH_REF" --cases "$WORK/torch-cases" >"$L/torch.jsonl" 2>"$L/torch.log"
    trc=$?
    [ "$trc" -eq 0 ] || { show_tail "$L/torch.log"; echo "      (torch_ref.py: exit $trc)"; }
fi
tv=$(sed -n 's/.*"torch": *"\([^"]*\)".*/\1/p' "$L/torch.jsonl" 2>/dev/null | head -n 1)
# ddpbench: each case eagerly (--cuda-graph off), then with graphs (auto)
for c in $TORCH_CASES; do
    for g in off on; do
        label="$c single gpu0 graphs $g"
        no_time "$label" 10 && continue
        pre=""
        [ "$(case_prec "$c")" = bf16 ] && pre="--precision bf16"
        ours "$(case_model "$c")" single 0 "$label" --cuda-graph "$([ "$g" = on ] && echo auto || echo off)" $pre ||
            continue
        echo "$c $g $OURS" >>"$OURSF"
    done
done
# ddpbench against PyTorch, each case and graph setting that ran; the goals
# take graphs on (mlp-small's by definition; the others' when it ran, else
# off, and say which)
for c in $TORCH_CASES; do
    case "$c" in mlp-small) gid=small_vs_torch ;; mlp-medium) gid=medium_vs_torch ;; mlp-large) gid=large_vs_torch ;;
    *) gid=large_bf16_vs_torch ;; esac
    prec=$(case_prec "$c")
    how=$([ "$prec" = bf16 ] && echo "autocast" || echo "eager")
    t=$(jfield "$c" samples_per_s)
    gfig="" gdet=""
    for g in off on; do
        o=$(ours_of "$c" "$g")
        [ -n "$o" ] || continue
        label="$c single gpu0 graphs $g vs PyTorch"
        extra="\"model\":\"$(case_model "$c")\",\"precision\":\"$prec\",\"cuda_graph\":\"$g\",\"ddpbench_samples_per_s\":$o"
        if [ "$HAVE_TORCH" != yes ]; then
            skip "$label" "ddpbench $o samples/s; no python3 with PyTorch and a GPU here (log: torch-import.log)" "$extra"
            gdet="no python3 with PyTorch and a GPU"
            continue
        fi
        if [ -z "$t" ]; then
            fail "$label" "ddpbench $o samples/s; the PyTorch run gave nothing: $(tail -n 1 "$L/torch.log" 2>/dev/null)" "$extra"
            gdet="the PyTorch run gave nothing"
            continue
        fi
        r=$(awk -v a="$o" -v b="$t" 'BEGIN { printf "%.3f", a / b }')
        ratio_row "$c, graphs $g: ddpbench / PyTorch $tv $how" "$o" "$t" "$r" "samples/s, $prec$([ "$prec" = fp32 ] && echo " (TF32 off)"), GPU 0"
        pass "$label" "ddpbench $o samples/s vs PyTorch $tv $how $t samples/s: ${r}x ($prec, CUDA graphs $g)" \
            "$extra,\"torch_samples_per_s\":$t,\"ratio_vs_torch\":$r,\"torch\":\"$(jstr "$tv")\""
        if [ "$g" = on ] || [ "$gid" != small_vs_torch ]; then
            gfig=$r gdet="ddpbench $o (CUDA graphs $g) vs PyTorch $tv $how $t samples/s"
        fi
    done
    if [ -z "$gfig" ] && [ -z "$gdet" ]; then
        gdet="ddpbench's run$([ "$gid" = small_vs_torch ] && echo " with CUDA graphs on") did not finish (see results)"
    fi
    goal "$gid" "$gfig" "$gdet"
done
# mlp-large's step (its samples/s over the batch) against the sum of its
# GEMMs timed alone with cuBLAS (torch_ref.py --gemms): what the step spends
# beyond its GEMMs; bf16's beside it, recorded, not a goal.  Graphs on where
# that run finished, else off.
lb=$(field "$(model_args mlp-large)" 5)
best_of() { o=$(ours_of "$1" on); [ -n "$o" ] && { echo "$o on"; return; }; o=$(ours_of "$1" off); [ -n "$o" ] && echo "$o off"; }
for c in mlp-large mlp-large-bf16; do
    p=$(case_prec "$c") bo=$(best_of "$c")
    o=${bo% *} g=${bo#* }
    gs=$(jfield "$c" gemm_s)
    if [ -z "$bo" ] || [ -z "$gs" ]; then
        [ "$p" = fp32 ] && goal large_step_vs_gemms "" \
            "$([ -z "$bo" ] && echo "ddpbench's mlp-large run did not finish" || echo "no GEMM timing from PyTorch")"
        continue
    fi
    r=$(awk -v b="$lb" -v o="$o" -v g="$gs" 'BEGIN { printf "%.3f", b / o / g }')
    st=$(awk -v b="$lb" -v o="$o" 'BEGIN { printf "%.6f", b / o }')
    ratio_row "mlp-large $p: step / its GEMMs alone (cuBLAS)" "$st" "$gs" "$r" "seconds per step, CUDA graphs $g, GPU 0"
    [ "$p" = fp32 ] && goal large_step_vs_gemms "$r" "step ${st}s (CUDA graphs $g), GEMMs alone ${gs}s"
    pass "mlp-large $p step vs its GEMMs" "step ${st}s (CUDA graphs $g), its GEMMs alone ${gs}s: ${r}x" \
        "\"model\":\"mlp-large\",\"precision\":\"$p\",\"cuda_graph\":\"$g\",\"step_s\":$st,\"gemm_s\":$gs,\"ratio\":$r"
done
# CUDA graphs on against off, every case: the throughput ratio, the launches
# per step each way, one graph launch per step and at most one host wait
# with graphs on.
GS="" GL="" # the most host syncs, the graph launches farthest from 1, with graphs on
for c in $TORCH_CASES; do
    on=$(ours_of "$c" on) off=$(ours_of "$c" off)
    [ -n "$on" ] || continue # its failure is recorded
    jon="$L/tput-$(safe "$c single gpu0 graphs on").json" joff="$L/tput-$(safe "$c single gpu0 graphs off").json"
    n=$(syncs "$jon") g=$(glaunches "$jon")
    GS=$(awk -v a="$GS" -v n="$n" 'BEGIN { print (n == "" ? a : (a == "" || n + 0 > a + 0) ? n : a) }')
    GL=$(awk -v a="$GL" -v g="$g" 'BEGIN { d = g - 1; e = a - 1; if (d < 0) d = -d; if (e < 0) e = -e
        print (g == "" ? a : (a == "" || d > e) ? g : a) }')
    [ -n "$off" ] || continue
    label="$c single gpu0 graphs on vs off"
    lon=$(launches "$jon") loff=$(launches "$joff")
    r=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3f", a / b }')
    ratio_row "$c: CUDA graphs on / off" "$on" "$off" "$r" "samples/s; launches/step ${lon:-?} vs ${loff:-?}"
    extra="\"model\":\"$(case_model "$c")\",\"precision\":\"$(case_prec "$c")\",\"graphs_on_samples_per_s\":$on,\"graphs_off_samples_per_s\":$off,\"ratio\":$r,\"launches_per_step_on\":${lon:-null},\"launches_per_step_off\":${loff:-null},\"graph_launches_per_step\":${g:-null},\"host_syncs_per_step\":${n:-null}"
    if awk -v g="$g" -v n="$n" 'BEGIN { exit !(g != "" && g > 0.5 && g <= 1 && n != "" && n <= 1) }'; then
        pass "$label" "${r}x ($on vs $off samples/s); launches per step $lon vs $loff; $g graph launches, $n host syncs per step" "$extra"
    else
        fail "$label" "graphs on: $g graph launches and $n host syncs per step (want about 1, <= 1)" "$extra"
    fi
done
goal host_syncs "$GS" "$([ -n "$GS" ] && echo "the torch step's runs with CUDA graphs on" || echo "no graphs-on run finished")"
goal graph_launches "$GL" "$([ -n "$GL" ] && echo "the torch step's runs with CUDA graphs on" || echo "no graphs-on run finished")"
# mlp-large in bf16 against its own fp32 step (issue 25's goal: 5x; a
# shortfall is recorded, not failed: a goal, not a fault), with the same
# CUDA graph setting (on where both ran, else off)
bf=""
for g in on off; do
    a=$(ours_of mlp-large-bf16 "$g") b=$(ours_of mlp-large "$g")
    [ -n "$a" ] && [ -n "$b" ] && { bf="$a $b $g"; break; }
done
if [ -n "$bf" ]; then
    set -- $bf
    r=$(awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }')
    ratio_row "mlp-large: ddpbench bf16 / its fp32" "$1" "$2" "$r" "samples/s, CUDA graphs $3, GPU 0 (goal: 5x)"
    goal large_bf16_vs_fp32 "$r" "bf16 $1 vs fp32 $2 samples/s, CUDA graphs $3"
    pass "mlp-large bf16 vs its fp32" "${r}x ($1 vs $2 samples/s, CUDA graphs $3)" \
        "\"model\":\"mlp-large\",\"cuda_graph\":\"$3\",\"bf16_samples_per_s\":$1,\"fp32_samples_per_s\":$2,\"ratio\":$r"
else
    goal large_bf16_vs_fp32 "" "no bf16 and fp32 runs of mlp-large with the same CUDA graph setting finished"
fi
# mlp-large under ddp: its ranks share an area in /dev/shm as large as the
# parameters, which a small /dev/shm (a container's 64 MiB) cannot hold.
label="mlp-large ddp nccl gpus $ALL"
np=$(nparams "$(field "$(model_args mlp-large)" 1)")
shmv=$(shm_verdict $((np * 4 + 64 * 1048576)) "$(shm_free)")
if [ "$shmv" != ok ]; then
    skip "$label" "$shmv"
elif ! no_time "$label" 15; then
    ours mlp-large ddp "$ALL" "$label" --comm nccl && o=$OURS && {
        single=$(best_of mlp-large)
        r=$([ -n "$single" ] && awk -v a="$o" -v b="${single% *}" 'BEGIN { printf "%.3f", a / b }')
        [ -n "$r" ] && ratio_row "mlp-large: ddp nccl $ALL / single" "$o" "${single% *}" "$r" "samples/s"
        pass "$label" "$o samples/s${r:+ (${r}x single)}" "\"model\":\"mlp-large\",\"ddpbench_samples_per_s\":$o"
    }
fi
fi

# ---- the box predicted before it is measured (--hardware, app/predict/) -------------------
# The GPU the probe found (cudaGetDeviceProperties' name) matched to the
# shipped profile of its published peaks; ddpbench models the small
# config's MLP on it (a CPU run of one step: nothing touches the GPU), and
# after steps 4-5 each prediction is recorded beside the measured p50 step
# (single; dp and ddp --gpus 0,0 against the 2-GPU row, which gives each
# replica a GPU of its own).  Within 15% is the aim; a finding either way.
box_profile() {
    case "$(echo "$names" | tr 'A-Z' 'a-z')" in
    *h200*) echo 1x-h200 ;;
    *h100*pcie*) echo 2x-h100-pcie ;;
    *h100*) echo 8x-h100-sxm ;;
    *a100*pcie*) echo 8x-a100-pcie ;;
    *a100*) echo 8x-a100-sxm ;;
    *v100*) echo dgx1-v100 ;;
    *"titan rtx"*) echo 2x-titan-rtx-nvlink ;;
    *3090*) echo 2x-rtx-3090-nvlink ;;
    *"gtx 1080"*) echo 3x-gtx-1080 ;;
    esac
}
BOX=$(box_profile)
predict_box() {
    [ -n "$BOX" ] || { skip "predicted box" "no shipped profile of a published peak for ${names%;}"; return; }
    run "$(lim 30)" "$L/predicted.json" --mode single --backend cpu --steps 1 --warmup-steps 0 --batch "$B" \
        $(cfg_args small) --hardware "$BOX" --json ||
        { fail "predicted box" "ddpbench --hardware $BOX: $(tail -n 1 "$L/predicted.json.err")"; return; }
    echo "      predicted on $BOX before measuring (the small MLP, batch $B)"
}
# predicted_vs_measured LABEL LOG ROW KEY: the prediction's KEY of row ROW
# against the measured p50 step in LOG
predicted_vs_measured() {
    [ -s "$L/predicted.json" ] && [ -s "$2" ] || return
    pred=$(tr ',' '\n' <"$L/predicted.json" | sed -n "/\"devices\":$3\$/,/\"$4\"/p" | sed -n "s/.*\"$4\":\(.*\)/\1/p" | head -n 1)
    meas=$(sed -n 's/.*"step_time_s":{"mean":[^,]*,"p50":\([^,]*\),.*/\1/p' "$2" | tail -n 1)
    [ -n "$pred" ] && [ -n "$meas" ] || return
    r=$(awk -v p="$pred" -v m="$meas" 'BEGIN { printf "%.3f", m / p }')
    held=$(awk -v r="$r" 'BEGIN { print (r >= 0.85 && r <= 1.15) ? "true" : "false" }')
    finding "predicted vs measured: $1" "$held" "$BOX model ${pred}s, measured p50 ${meas}s (x$r; aim within 15%)" \
        "\"hardware\":\"$BOX\",\"predicted_s\":$pred,\"measured_s\":$meas,\"measured_over_predicted\":$r"
}

# ---- 4./5. the modes on the GPU vs single on the CPU --------------------------------------
if want single; then
step single
predict_box
compare "single gpu0 small" small "$B" 1 --mode single --gpus 0
compare "single gpu0 gelu-sgd" gelu-sgd "$B" 1 --mode single --gpus 0
fi

if want ddp; then
step ddp
compare "ddp nccl gpus $ALL small" small "$B" 1 --mode ddp --comm nccl --gpus "$ALL"
# shm on a GPU: the input's copy to the host is waited for once a step, beside
# the loss's (host_syncs_per_step counts both)
compare "ddp shm gpus 0,0 small" small "$B" 2 --mode ddp --comm shm --gpus 0,0
# dp on one GPU: --cuda-graph auto replays each step as one graph of both
# devices; beside it, eager: the graphs' gain
compare "dp gpus 0,0 small" small "$B" 1 --mode dp --gpus 0,0
compare "dp gpus 0,0 small graphs off" small "$B" 1 --mode dp --gpus 0,0 --cuda-graph off
gain "dp gpus 0,0 small" "dp gpus 0,0 small graphs off" "dp --gpus 0,0 small: CUDA graphs on / off"
if [ "$NGPU" -ge 2 ]; then
    compare "dp gpus $ALL small" small "$B" 1 --mode dp --gpus "$ALL"
    # auto runs dp over NCCL eagerly (NCCL warns that several GPUs of one
    # process in graphs may deadlock); on captures it: does it run, or hang
    # (cut at the step's limit, "timed out")?
    compare "dp nccl gpus $ALL small graphs on" small "$B" 1 --mode dp --gpus "$ALL" --cuda-graph on
    compare "ddp nccl gpus $ALL gelu-sgd" gelu-sgd "$B" 1 --mode ddp --comm nccl --gpus "$ALL"
fi
fi
predicted_vs_measured "single" "$L/single_gpu0_small.json" 1 single_s
predicted_vs_measured "dp --gpus 0,0" "$L/dp_gpus_0_0_small.json" 2 dp_s
predicted_vs_measured "ddp shm --gpus 0,0" "$L/ddp_shm_gpus_0_0_small.json" 2 ddp_s

# ---- 6. the GPU unit suites, one process each ------------------------------------------
# test_comm_nccl's init-abort tests are the findings' (step 9): never met a
# real NCCL, they must not cut this step short.
INIT_TESTS="a_missing_peer_fails_init_at_the_init_bound an_abort_stops_a_waiting_init_at_once"
INIT_PAT=$(echo $INIT_TESTS | tr ' ' '|')
if want suites; then
step suites
for suite in $SUITES; do
    name=$(basename "$suite")
    no_time "$name" 15 && continue
    log="$L/$name.log"
    if [ "$name" = test_comm_nccl ]; then
        timeout "$(lim 90)" "$suite" --jobs 4 --verbose --filter "comm_nccl/!($INIT_PAT)" >"$log" 2>&1
    else
        timeout "$(lim 90)" "$suite" --jobs 4 --verbose >"$log" 2>&1
    fi
    rc=$?
    np_=$(grep -c '^\[PASS\]' "$log") nf=$(grep -Ec '^\[(FAIL|CRASH)\]' "$log")
    nogpu=$(grep -E '^\[SKIP\] .*no GPU' "$log" | head -n 3 | sed 's/^\[SKIP\] //' | tr '\n' ';')
    ns=$(grep '^\[SKIP\]' "$log" | grep -vc 'Test is disabled')
    extra="\"passed\":$np_,\"failed\":$nf,\"skipped\":$ns"
    if [ "$rc" -eq 124 ]; then
        fail "$name" "timed out ($np_ passed so far)" "$extra"
    elif [ -n "$nogpu" ]; then
        fail "$name" "skipped for want of a GPU although $NGPU are visible: $nogpu" "$extra"
    elif [ "$rc" -ne 0 ] || [ "$nf" -gt 0 ]; then
        grep -E '^\[(FAIL|CRASH)\]|Assertion' "$log" | head -n 5 | sed 's/^/      /'
        fail "$name" "$nf failed ($np_ passed, $ns skipped)" "$extra"
    elif [ "$np_" -eq 0 ]; then
        fail "$name" "no test passed (log: $name.log)" "$extra"
    else
        pass "$name" "$np_ passed, $ns skipped$([ "$name" = test_comm_nccl ] && echo "; its init-abort tests are findings")" "$extra"
    fi
done
fi

# ---- 7. faults -------------------------------------------------------------------------
# fault LABEL EXPECTED-TEXT MAX-SECONDS FAULT ARGS...: exit 1, EXPECTED-TEXT in
# the message, within MAX-SECONDS, nothing left in /dev/shm.
fault() {
    label=$1 want=$2 max=$3 f=$4
    shift 4
    no_time "$label" "$max" && return
    log="$L/fault-$(safe "$label").log"
    shm0=$(ls /dev/shm 2>/dev/null | wc -l)
    t0=$(date +%s)
    DDPBENCH_FAULT=$f timeout "$(lim $((max + 10)))" "$BIN" --backend cuda --steps 12 \
        $(cfg_args small) --batch 64 --quiet "$@" >"$log" 2>&1
    rc=$? secs=$(($(date +%s) - t0))
    shm1=$(ls /dev/shm 2>/dev/null | wc -l)
    msg=$(grep 'ddpbench: error' "$log" | tail -n 1)
    if [ "$rc" -ne 1 ]; then
        fail "$label" "exit $rc, not 1${msg:+: $msg}"
    elif ! grep -q "$want" "$log"; then
        fail "$label" "no '$want' in: $msg"
    elif [ "$secs" -gt "$max" ]; then
        fail "$label" "took ${secs}s (at most ${max}s): $msg"
    elif [ "$shm1" -gt "$shm0" ]; then
        fail "$label" "left $((shm1 - shm0)) entries in /dev/shm"
    else
        pass "$label" "exit 1 in ${secs}s: $msg"
    fi
}
if want faults; then
step faults
fault "nccl injected error" "rank 0 (device 0): injected fault at step 3" 25 error:0:3 --mode ddp --comm nccl --gpus 0
fault "nccl killed rank" "killed by signal 9" 25 kill:0:4 --mode ddp --comm nccl --gpus "$([ "$NGPU" -ge 2 ] && echo 0,1 || echo 0)"
if [ "$NGPU" -ge 2 ]; then
    fault "nccl stalled rank" "did not arrive within 5 s" 25 stall:1:3 --mode ddp --comm nccl --gpus 0,1 --timeout 5
else
    fault "shm stalled rank" "did not arrive within 5 s" 25 stall:1:3 --mode ddp --comm shm --gpus 0,0 --timeout 5
fi
fi

# ---- 8. --trace, --mode comm -------------------------------------------------------------
trace_check() { # LABEL RANKS-THAT-REDUCE ARGS...
    label=$1 ranks=$2
    shift 2
    no_time "$label" 8 && return
    tr="$L/trace-$(safe "$label").json"
    if ! run "$(lim 30)" "$L/trace.log" --backend cuda --steps 8 $(cfg_args small) --batch 64 --quiet \
        --trace "$tr" "$@"; then
        fail "$label" "run failed: $(tail -n 1 "$L/trace.log.err")"
        return
    fi
    v=$(trace_verdict "$tr" "$ranks")
    case "$v" in
    ok*) pass "$label" "longest spans (us): ${v#ok }" ;;
    *) fail "$label" "a span is zero or missing: ${v#bad }" ;;
    esac
}
collectives() { # LABEL ARGS...
    label=$1
    shift
    no_time "$label" 10 && return
    log="$L/comm-$(safe "$label").log"
    if run "$(lim 30)" "$log" --mode comm --backend cuda -b 8 -e 16M -f 8 "$@"; then
        grep -q "Out of bounds values : 0 OK" "$log" &&
            pass "$label" "$(grep 'Avg bus bandwidth' "$log" | sed 's/^# //')" ||
            fail "$label" "the check found wrong values"
    else
        show_tail "$log.err"
        fail "$label" "run failed: $(tail -n 1 "$log.err")"
    fi
}
if want trace; then
step trace
trace_check "trace single" 0 --mode single --gpus 0
trace_check "trace ddp nccl gpus $ALL" "$NGPU" --mode ddp --comm nccl --gpus "$ALL"
if [ "$NGPU" -ge 2 ]; then
    collectives "comm nccl gpus $ALL" --comm nccl --gpus "$ALL"
else
    collectives "comm nccl 1 rank" --comm nccl --gpus 0
fi
collectives "comm shm gpus 0,0" --comm shm --gpus 0,0
fi

# ---- 9. findings: what never met a real NCCL -----------------------------------------------
# test_comm_nccl's init-abort tests, one process, each judged from its log:
# a group of two whose peer never joins must fail at the init bound, an
# abort during the init must end it at once.  Last, so that a hang (NCCL's
# non-blocking init or its abort on a real communicator) cuts nothing short.
if want findings; then
step findings
nccl_suite=""
for suite in $SUITES; do [ "$(basename "$suite")" = test_comm_nccl ] && nccl_suite=$suite; done
if [ -z "$nccl_suite" ] || [ ! -x "$nccl_suite" ]; then
    for t in $INIT_TESTS; do finding "test_comm_nccl $t" null "not run: no test_comm_nccl here"; done
elif no_time "test_comm_nccl init-abort tests" 8; then
    for t in $INIT_TESTS; do finding "test_comm_nccl $t" null "not run: out of time"; done
else
    log="$L/findings-init-abort.log"
    timeout "$(lim 15)" "$nccl_suite" --jobs 1 --verbose --filter "comm_nccl/@($INIT_PAT)" >"$log" 2>&1
    rc=$?
    for t in $INIT_TESTS; do
        line=$(grep -E "^\[(PASS|FAIL|SKIP)\] comm_nccl::$t" "$log" | head -n 1)
        case "$line" in
        "[PASS]"*) finding "test_comm_nccl $t" true "passed on this NCCL: ${line##*: }" ;;
        "[FAIL]"*)
            why=$(grep -B 6 "^\[FAIL\] comm_nccl::$t" "$log" | sed -n 's/^\[----\]   \([^ ].*\)/\1/p' | head -n 1)
            finding "test_comm_nccl $t" false "failed on this NCCL: ${why:-${line#*: }}" ;;
        "[SKIP]"*) finding "test_comm_nccl $t" null "skipped: ${line##*: }" ;;
        *) finding "test_comm_nccl $t" false "did not finish (exit $rc$([ "$rc" -eq 124 ] && echo ", timed out: a hang in NCCL's init or abort"); log: findings-init-abort.log)" ;;
        esac
    done
fi
fi
finish
