#!/bin/sh
# tests/gpu/check.sh: the whole GPU check, for a machine with one or more
# NVIDIA GPUs.  It runs from a kit (make gpu-kit: ddpbench, the GPU test
# binaries and the libraries they need, for a box with only the driver, the
# CUDA toolkit and PyTorch) or from a source tree (it builds with make):
#
#   sh check.sh                  in the kit's folder, or
#   sh tests/gpu/check.sh        in a source tree
#
# Within about five minutes on one H200 (every step has its own time limit,
# and the whole check a budget, BUDGET seconds, default 290):
#  1. the libraries: cuBLAS and cudart from the toolkit, NCCL from the
#     toolkit or else PyTorch's NCCL wheel (named in the output), and the
#     driver; the GPUs (names, PCI ids, memory, links) as ddpbench sees them;
#  2. the GPU unit suites (test_cuda, test_comm_nccl), each test on its own
#     with its own time limit, failing any that skips for want of a GPU;
#  3. single, dp and ddp on the GPUs against single on the CPU (1e-4), at
#     most one host synchronisation per step; dp --gpus 0,0 and ddp --gpus
#     0,0 --comm shm (two replicas or ranks on one GPU);
#  4. an injected rank fault and a killed rank under NCCL, a stalled rank
#     (under NCCL with two GPUs, else under shm on one): exit 1, the rank
#     named, no hang;
#  5. --trace: the phases' and the all-reduces' spans are not zero;
#  6. throughput of mlp-medium and mlp-large in single and ddp (NCCL, every
#     GPU), and, when python3 can import torch, the same model, batch and
#     optimizer in PyTorch eager on the same GPU, side by side as a ratio.
# It writes one JSON of every result (check.json in the output folder) and
# ends with one line: "gpu check: PASS (n/n)" or "gpu check: FAIL (...)",
# exiting 0 or 1.
#
# Environment: CUDA_VISIBLE_DEVICES is respected; CUDA_HOME (default
# /usr/local/cuda); OUT (default: results/ in the kit, build/gpu-check in a
# tree); BUDGET (seconds, default 290); TOL (default 1e-4); JOBS (make -j).
# shellcheck disable=SC2086,SC2046,SC2012 # option lists are meant to split; ls counts entries
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
T_START=$(date +%s)
BUDGET=${BUDGET:-290}
TOL=${TOL:-1e-4}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -x "$HERE/ddpbench" ] && [ -d "$HERE/lib" ]; then
    KIT=yes
    cd "$HERE" || exit 1
    BIN=$HERE/ddpbench
    SUITES="$HERE/tests/test_cuda $HERE/tests/test_comm_nccl"
    TORCH_REF=$HERE/torch_ref.py
    OUT=${OUT:-$HERE/results}
else
    KIT=no
    cd "$HERE/../.." || exit 1
    BIN=$(pwd)/ddpbench
    SUITES="$(pwd)/build/release/tests/unit/test_cuda $(pwd)/build/release/tests/gpu/test_comm_nccl"
    TORCH_REF=$(pwd)/tests/gpu/torch_ref.py
    OUT=${OUT:-build/gpu-check}
fi
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
RES=$OUT/results.jsonl
: >"$RES"
npass=0 nfail=0 nskip=0 failed="" skipped=""

# ---- bookkeeping ------------------------------------------------------------------
elapsed() { echo $(($(date +%s) - T_START)); }
left() { echo $((BUDGET - $(elapsed))); }
# limit N: N seconds, or what is left of the budget (at least 1)
limit() { l=$(left); l=$((l - 5)); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }
jstr() { printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g'; }
record() { # STATUS NAME DETAIL [EXTRA-JSON]
    printf '{"name":"%s","status":"%s","detail":"%s","at_s":%s%s}\n' "$(jstr "$2")" "$1" \
        "$(jstr "$3")" "$(elapsed)" "${4:+,$4}" >>"$RES"
}
pass() { npass=$((npass + 1)); record pass "$1" "$2" "${3:-}"; echo "PASS  $1: $2"; }
fail() {
    nfail=$((nfail + 1)); failed="$failed${failed:+, }$1"
    record fail "$1" "$2" "${3:-}"; echo "FAIL  $1: $2"
}
skip() {
    nskip=$((nskip + 1)); skipped="$skipped${skipped:+, }$1"
    record skip "$1" "$2"; echo "SKIP  $1: $2"
}
# out_of_time NAME NEEDED: skip (and say so) when the budget cannot fit NEEDED seconds
out_of_time() {
    [ "$(left)" -ge "$2" ] && return 1
    skip "$1" "out of the time budget (${BUDGET}s)"
    return 0
}
show_tail() { tail -n 12 "$1" | sed 's/^/      | /'; }
ENV_JSON="{}"
finish() {
    total=$((npass + nfail))
    secs=$(elapsed)
    extra=""
    [ "$nskip" -gt 0 ] && extra="; $nskip skipped: $skipped"
    if [ "$nfail" -eq 0 ] && [ "$total" -gt 0 ]; then
        verdict="gpu check: PASS ($npass/$total$extra) in ${secs}s"
        ok=true
    else
        verdict="gpu check: FAIL ($nfail of $total failed: $failed$extra) in ${secs}s"
        ok=false
    fi
    {
        printf '{"tool":"ddpbench gpu check","kit":%s,"ok":%s,"verdict":"%s","seconds":%s,' \
            "$([ "$KIT" = yes ] && echo true || echo false)" "$ok" "$(jstr "$verdict")" "$secs"
        printf '"passed":%s,"failed":%s,"skipped":%s,"environment":%s,"results":[' \
            "$npass" "$nfail" "$nskip" "$ENV_JSON"
        sep=""
        while IFS= read -r line; do printf '%s%s' "$sep" "$line"; sep=","; done <"$RES"
        printf ']}\n'
    } >"$OUT/check.json.tmp" && mv "$OUT/check.json.tmp" "$OUT/check.json"
    echo "      (every result: $OUT/check.json)"
    echo "$verdict"
    [ "$ok" = true ]
    exit $?
}
abort() { fail "$1" "$2"; finish; }

# ---- 0. build (source tree only) ---------------------------------------------------
if [ "$KIT" = no ]; then
    echo "== build (make)"
    if ! make -j"${JOBS:-$(nproc 2>/dev/null || echo 2)}" ddpbench build/release/tests/unit/test_cuda \
        build/release/tests/gpu/test_comm_nccl >"$OUT/build.log" 2>&1; then
        show_tail "$OUT/build.log"
        abort build "make failed (log: $OUT/build.log)"
    fi
    grep -q 'HAVE_NCCL' build/release/flags.txt 2>/dev/null ||
        abort build "the build has no CUDA or no NCCL (is nvcc at \$CUDA_HOME/bin/nvcc, nccl.h installed?)"
    pass build "CUDA and NCCL built in"
fi

# ---- 1. libraries, driver, GPUs ----------------------------------------------------
# The kit carries every library but the driver, cudart/cuBLAS and NCCL: find
# those where the box has them -- the toolkit, else PyTorch's wheels.
site_dirs() {
    command -v python3 >/dev/null 2>&1 &&
        python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
}
missing() { ldd "$1" 2>/dev/null | sed -n 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p' | sort -u; }
find_lib() { # SONAME -> a folder holding it
    for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" /usr/local/cuda/lib64 /usr/local/cuda/lib \
        /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib /usr/lib/x86_64-linux-gnu; do
        [ -e "$d/$1" ] && { echo "$d"; return 0; }
    done
    for s in $(site_dirs); do
        for d in "$s"/nvidia/*/lib "$s"/torch/lib; do
            [ -e "$d/$1" ] && { echo "$d"; return 0; }
        done
    done
    return 1
}
for b in "$BIN" $SUITES; do
    [ -x "$b" ] || abort libraries "$b is missing"
    for so in $(missing "$b"); do
        d=$(find_lib "$so") || continue
        case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
        export LD_LIBRARY_PATH
    done
done
left_over=""
for b in "$BIN" $SUITES; do left_over="$left_over $(missing "$b")"; done
left_over=$(echo $left_over | tr ' ' '\n' | sort -u | tr '\n' ' ')
[ -z "${left_over% }" ] || abort libraries "not found anywhere: $left_over(toolkit at CUDA_HOME=$CUDA_HOME? PyTorch's nvidia wheels?)"
where() { ldd "$BIN" | sed -n "s/^[[:space:]]*$1[^ ]* => \\([^ ]*\\).*/\\1/p" | head -n 1; }
origin() { case "$1" in *site-packages*|*dist-packages*) echo "PyTorch's wheel" ;; "$HERE"/lib/*) echo "the kit" ;; *) echo "the system/toolkit" ;; esac; }
NCCL_SO=$(where libnccl.so) CUBLAS_SO=$(where libcublas.so) CUDART_SO=$(where libcudart.so)
DRIVER_SO=$(ldconfig -p 2>/dev/null | sed -n 's/.*libcuda\.so\.1 .*=> \(.*\)/\1/p' | head -n 1)
pass libraries "NCCL $NCCL_SO ($(origin "$NCCL_SO")); cuBLAS $CUBLAS_SO; cudart $CUDART_SO; driver ${DRIVER_SO:-libcuda.so.1 (not in ldconfig)}"
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/      gpu /'

# The GPUs as ddpbench sees them (its probe: CUDA's numbering).
"$BIN" --mode single --backend auto --steps 1 --samples 64 --batch 32 --layers 4,4 --loss mse \
    --json >"$OUT/probe.json" 2>"$OUT/probe.log"
NGPU=$(sed -n 's/.*(auto: \([0-9][0-9]*\) GPUs\{0,1\} visible).*/\1/p' "$OUT/probe.log" | head -n 1)
if [ -z "$NGPU" ]; then
    why=$(sed -n 's/.*(auto: no GPU, \(.*\)), devices.*/\1/p' "$OUT/probe.log" | head -n 1)
    abort probe "no GPU visible: ${why:-see $OUT/probe.log}"
fi
ENV_JSON=$(sed -n 's/.*"environment":\({.*}\),"steps":.*/\1/p' "$OUT/probe.json")
[ -n "$ENV_JSON" ] || ENV_JSON="{}"
ENV_JSON=$(printf '{"nccl":"%s","nccl_from":"%s","cublas":"%s","cudart":"%s","ddpbench":%s}' \
    "$(jstr "$NCCL_SO")" "$(origin "$NCCL_SO")" "$(jstr "$CUBLAS_SO")" "$(jstr "$CUDART_SO")" "$ENV_JSON")
names=$(sed -n 's/.*"gpus":\[\([^]]*\)\].*/\1/p' "$OUT/probe.json" | grep -o '"name":"[^"]*"' |
    cut -d'"' -f4 | sort | uniq -c | sed 's/^ *\([0-9]*\) /\1 x /' | tr '\n' ';')
pass probe "$NGPU GPU(s) visible${CUDA_VISIBLE_DEVICES+ (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)}: ${names%;}"
ALL=$(i=0; l=""; while [ "$i" -lt "$NGPU" ]; do l="$l${l:+,}$i"; i=$((i + 1)); done; echo "$l")

# ---- 2. the GPU unit suites, one test at a time ------------------------------------
echo "== GPU unit suites (each test with its own limit)"
for suite in $SUITES; do
    name=$(basename "$suite")
    tests=$("$suite" --list 2>/dev/null | awk '/: [0-9]+ tests?$/ { s = $1; sub(":", "", s) } /── / { print s "/" $NF }')
    [ -n "$tests" ] || { fail "$name" "lists no tests"; continue; }
    for t in $tests; do
        out_of_time "$name $t" 10 && continue
        log="$OUT/$name-$(echo "$t" | tr '/' '.').log"
        timeout "$(limit 90)" "$suite" --filter "$t" --jobs 1 --verbose >"$log" 2>&1
        rc=$?
        id=$(echo "$t" | sed 's|/|::|') # the test's own line; the others show as disabled
        if [ "$rc" -eq 124 ]; then
            fail "$name $t" "timed out (log: $log)"
        elif [ "$rc" -ne 0 ] || grep -q "^\[FAIL\] $id" "$log"; then
            grep -E 'Assertion|FAIL|CRASH' "$log" | head -n 5 | sed 's/^/      /'
            fail "$name $t" "failed (log: $log)"
        elif grep -q "^\[SKIP\] $id: .*no GPU" "$log"; then
            fail "$name $t" "skipped 'no GPU' although $NGPU GPU(s) are visible"
        elif grep -q "^\[SKIP\] $id:" "$log"; then
            skip "$name $t" "$(sed -n "s/^\[SKIP\] $id: *//p" "$log" | head -n 1)"
        elif grep -q "^\[PASS\] $id:" "$log"; then
            pass "$name $t" "$(sed -n "s/^\[PASS\] $id: *//p" "$log" | head -n 1)"
        else
            fail "$name $t" "no result line (log: $log)"
        fi
    done
done

# ---- 3. every mode on the GPUs vs single on the CPU --------------------------------
# From --json: checksum sum and |sum|, and host_syncs_per_step (the run's: the
# last key of that name, after the devices').
sums() { sed -n 's/.*"checksum":{"sum":\([^,]*\),"abs_sum":\([^,]*\),.*/\1 \2/p' "$1"; }
syncs() { sed -n 's/.*"host_syncs_per_step":\([^,}]*\).*/\1/p' "$1"; }
tput() { sed -n 's/.*"throughput_samples_per_s":\([^,]*\),.*/\1/p' "$1"; }
cfg_args() {
    case "$1" in
    small) echo "--layers 32,128,128,10 --act relu --loss ce --dataset classes --optim adam --lr 0.001 --samples 4096" ;;
    gelu-sgd) echo "--layers 64,256,256,8 --act gelu --loss mse --optim sgd --lr 0.01 --momentum 0.9 --samples 4096" ;;
    small-accum2) echo "$(cfg_args small) --accum 2" ;;
    esac
}
# run LIMIT LOG ARGS...: ddpbench with a time limit; its exit status (124: timed out)
run() {
    lim=$1 log=$2
    shift 2
    timeout "$lim" "$BIN" "$@" >"$log" 2>"$log.err"
    rc=$?
    [ "$rc" -eq 124 ] && echo "ddpbench: timed out after ${lim}s" >>"$log.err"
    return "$rc"
}
cpu_ref() { # CFG BATCH -> "sum abs"
    ref="$OUT/cpu-$1-b$2.json"
    if [ ! -s "$ref" ] || [ -z "$(sums "$ref")" ]; then
        run "$(limit 60)" "$ref" --mode single --backend cpu --threads "$(nproc 2>/dev/null || echo 2)" \
            --steps 20 --batch "$2" $(cfg_args "$1") --json || return 1
    fi
    sums "$ref"
}
compare() { # LABEL CFG BATCH ARGS...
    label=$1 cfg=$2 batch=$3
    shift 3
    out_of_time "$label" 20 && return
    log="$OUT/$(echo "$label" | tr ' ,/' '__-').json"
    if ! run "$(limit 90)" "$log" --steps 20 --batch "$batch" $(cfg_args "$cfg") --backend cuda --json "$@"; then
        show_tail "$log.err"
        fail "$label" "run failed (log: $log.err)"
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
    case "$verdict" in
    ok*) if awk -v n="$n" 'BEGIN { exit !(n != "" && n <= 1) }'; then
             pass "$label" "$r from the CPU, $n host sync(s) per step" "$extra"
         else
             fail "$label" "the host waited for the GPU $n times per step (at most 1)" "$extra"
         fi ;;
    *) fail "$label" "parameters differ from the CPU by $r > $TOL" "$extra" ;;
    esac
}
echo "== modes on the GPU vs single on the CPU (20 steps, tolerance $TOL)"
W=$NGPU
[ "$W" -lt 2 ] && W=2
B=$((32 * W)) # divisible by every world size used below
for cfg in small gelu-sgd; do
    compare "single gpu0 $cfg" "$cfg" "$B" --mode single --gpus 0
    compare "ddp nccl 1 rank $cfg" "$cfg" "$B" --mode ddp --comm nccl --gpus 0
    compare "dp gpus 0,0 $cfg" "$cfg" "$B" --mode dp --gpus 0,0
    compare "ddp shm gpus 0,0 $cfg" "$cfg" "$B" --mode ddp --comm shm --gpus 0,0
    if [ "$NGPU" -ge 2 ]; then
        compare "dp gpus $ALL $cfg" "$cfg" "$B" --mode dp --gpus "$ALL"
        compare "ddp nccl gpus $ALL $cfg" "$cfg" "$B" --mode ddp --comm nccl --gpus "$ALL"
        # a batch the ranks do not divide: dealt out, each rank weighted by
        # its rows (4096 samples: no sampler padding for 2, 4 or 8 GPUs, so
        # the CPU's plain stream is the same)
        [ $((4096 % NGPU)) -eq 0 ] &&
            compare "ddp nccl uneven batch gpus $ALL $cfg" "$cfg" "$((B + 1))" --mode ddp --comm nccl --gpus "$ALL"
    fi
done
compare "single gpu0 small accum 2" small-accum2 "$B" --mode single --gpus 0
compare "ddp nccl 1 rank small accum 2" small-accum2 "$B" --mode ddp --comm nccl --gpus 0 --accum 2

# ---- 3b. the collectives alone (--mode comm): every result checked ----------------------
collectives() { # LABEL ARGS...
    label=$1
    shift
    out_of_time "$label" 30 && return
    log="$OUT/comm-$(echo "$label" | tr ' ,/' '__-').log"
    if run "$(limit 120)" "$log" --mode comm --backend cuda -b 8 -e 64M -f 8 "$@"; then
        grep -q "Out of bounds values : 0 OK" "$log" &&
            pass "$label" "$(grep 'Avg bus bandwidth' "$log" | sed 's/^# //')" ||
            fail "$label" "the check found wrong values (log: $log)"
    else
        show_tail "$log.err"
        fail "$label" "run failed (log: $log.err)"
    fi
}
echo "== the collectives (--mode comm)"
if [ "$NGPU" -ge 2 ]; then
    collectives "comm nccl gpus $ALL" --comm nccl --gpus "$ALL"
    collectives "comm shm gpus $ALL" --comm shm --gpus "$ALL"
else
    collectives "comm nccl 1 rank" --comm nccl --gpus 0
    collectives "comm shm gpus 0,0" --comm shm --gpus 0,0
fi

# ---- 4. faults ---------------------------------------------------------------------
# fault LABEL EXPECTED-TEXT MAX-SECONDS FAULT ARGS...: exit 1, EXPECTED-TEXT in
# the message, within MAX-SECONDS, nothing left in /dev/shm.
fault() {
    label=$1 want=$2 max=$3 f=$4
    shift 4
    out_of_time "$label" "$max" && return
    log="$OUT/fault-$(echo "$label" | tr ' ,/' '__-').log"
    shm0=$(ls /dev/shm 2>/dev/null | wc -l)
    t0=$(date +%s)
    DDPBENCH_FAULT=$f timeout "$(limit $((max + 30)))" "$BIN" --backend cuda --steps 12 \
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
echo "== faults"
fault "nccl injected error" "rank 0 (device 0): injected fault at step 3" 60 error:0:3 --mode ddp --comm nccl --gpus 0
fault "nccl killed rank" "killed by signal 9" 60 kill:0:4 --mode ddp --comm nccl --gpus "$([ "$NGPU" -ge 2 ] && echo 0,1 || echo 0)"
if [ "$NGPU" -ge 2 ]; then
    fault "nccl stalled rank" "did not arrive within 5 s" 45 stall:1:3 --mode ddp --comm nccl --gpus 0,1 --timeout 5
else
    skip "nccl stalled rank" "NCCL puts one rank on a GPU: needs two GPUs (the stall runs under shm below)"
fi
fault "shm stalled rank" "did not arrive within 5 s" 45 stall:1:3 --mode ddp --comm shm --gpus 0,0 --timeout 5

# ---- 5. --trace --------------------------------------------------------------------
# max_dur NAME-PREFIX FILE: the longest "dur" of events whose name starts so
dur_of() { sed -n "s/.*\"name\":\"$1[^\"]*\",[^}]*\"dur\":\([0-9.e+-]*\).*/\\1/p" "$2" | sort -g | tail -n 1; }
trace_check() { # LABEL ARGS...
    label=$1
    shift
    out_of_time "$label" 20 && return
    tr="$OUT/trace-$(echo "$label" | tr ' ,/' '__-').json"
    if ! run "$(limit 60)" "$OUT/trace.log" --backend cuda --steps 8 $(cfg_args small) --batch 64 --quiet \
        --trace "$tr" "$@"; then
        fail "$label" "run failed: $(tail -n 1 "$OUT/trace.log.err")"
        return
    fi
    f=$(dur_of forward "$tr") b=$(dur_of backward "$tr") a=$(dur_of all-reduce "$tr")
    case "$*" in *ddp*) need_a=yes ;; *) need_a=no ;; esac
    if awk -v f="${f:-0}" -v b="${b:-0}" -v a="${a:-0}" -v na="$need_a" \
        'BEGIN { exit !(f > 0 && b > 0 && (na == "no" || a > 0)) }'; then
        pass "$label" "longest spans (ms): forward $f, backward $b${a:+, all-reduce $a}"
    else
        fail "$label" "a span is zero or missing: forward ${f:-none}, backward ${b:-none}, all-reduce ${a:-none} ($tr)"
    fi
}
echo "== --trace"
trace_check "trace single" --mode single --gpus 0
trace_check "trace ddp nccl" --mode ddp --comm nccl --gpus "$ALL"

# ---- 6. throughput, and PyTorch eager on the same GPU -------------------------------
# The synthetic teachers of mlp-medium and mlp-large take minutes to make on
# one core, so their data is random .npy files (numpy, else perl); the
# throughput does not depend on the values.
write_npy() { # FILE ROWS COLS SEED: float32 uniform(-1, 1), C order
    if command -v python3 >/dev/null 2>&1 && python3 -c 'import numpy' 2>/dev/null; then
        python3 -c 'import sys, numpy as np
f, r, c, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
np.save(f, np.random.default_rng(s).uniform(-1, 1, (r, c)).astype("<f4"))' "$@"
        return
    fi
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
HAVE_TORCH=no
if command -v python3 >/dev/null 2>&1 &&
    timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    HAVE_TORCH=yes
fi
# model -> "layers|act|optimizer options|batch|steps|warm-up" (the presets' values)
model_args() {
    case "$1" in
    mlp-medium) echo "1024,2048,2048,1024|relu|--optim sgd --lr 0.01 --momentum 0.9|256|60|10" ;;
    mlp-large) echo "4096,8192,8192,8192,4096|gelu|--optim adamw --lr 0.0001|2048|20|4" ;;
    esac
}
field() { echo "$1" | cut -d'|' -f"$2"; }
throughput() { # MODEL MODE GPUS
    model=$1 mode=$2 gpus=$3
    label="$model $mode gpus $gpus"
    out_of_time "$label" 40 && return
    m=$(model_args "$model")
    layers=$(field "$m" 1) act=$(field "$m" 2) opt=$(field "$m" 3)
    batch=$(field "$m" 4) steps=$(field "$m" 5) warm=$(field "$m" 6)
    w=$(echo "$gpus" | tr ',' '\n' | wc -l)
    b=$((batch - batch % w))
    log="$OUT/tput-$(echo "$label" | tr ' ,/' '__-').json"
    lim=$(limit 150)
    run "$lim" "$log" --backend cuda --model "$model" --data "$OUT/$model-x.npy" \
        --targets "$OUT/$model-y.npy" --batch "$b" --steps "$steps" --warmup-steps "$warm" --mode "$mode" \
        --gpus "$gpus" --json
    rc=$?
    if [ "$rc" -eq 124 ] && [ "$lim" -lt 150 ]; then
        skip "$label" "cut off after ${lim}s by the time budget (${BUDGET}s)"
        return
    elif [ "$rc" -ne 0 ]; then
        show_tail "$log.err"
        fail "$label" "run failed (log: $log.err)"
        return
    fi
    ours=$(tput "$log") n=$(syncs "$log")
    extra="\"model\":\"$model\",\"mode\":\"$mode\",\"gpus\":\"$gpus\",\"batch\":$b,\"ddpbench_samples_per_s\":${ours:-null},\"host_syncs_per_step\":${n:-null}"
    if [ "$mode" != single ] || [ "$HAVE_TORCH" != yes ]; then
        why=""
        [ "$mode" = single ] && why=" (no PyTorch with a GPU here: no comparison)"
        pass "$label" "$ours samples/s, $n host sync(s) per step$why" "$extra"
        return
    fi
    tlog="$OUT/torch-$model.json"
    timeout "$(limit 150)" python3 "$TORCH_REF" --layers "$layers" --act "$act" $opt \
        --batch "$b" --steps "$steps" --warmup "$warm" --samples 4096 --device 0 >"$tlog" 2>"$tlog.err"
    theirs=$(sed -n 's/.*"samples_per_s": *\([0-9.e+-]*\).*/\1/p' "$tlog")
    if [ -z "$theirs" ]; then
        fail "$label" "$ours samples/s; the PyTorch run failed: $(tail -n 1 "$tlog.err")" "$extra"
        return
    fi
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')
    tv=$(sed -n 's/.*"torch": *"\([^"]*\)".*/\1/p' "$tlog")
    pass "$label" "ddpbench $ours samples/s vs PyTorch $tv eager $theirs samples/s: ${ratio}x (fp32, TF32 off)" \
        "$extra,\"torch_samples_per_s\":$theirs,\"ratio_vs_torch\":$ratio,\"torch\":\"$(jstr "$tv")\""
}
echo "== throughput$([ "$HAVE_TORCH" = yes ] && echo ", against PyTorch eager")"
for model in mlp-medium mlp-large; do
    layers=$(field "$(model_args "$model")" 1)
    cols_in=$(echo "$layers" | cut -d, -f1) cols_out=$(echo "$layers" | tr ',' '\n' | tail -n 1)
    if ! { [ -s "$OUT/$model-x.npy" ] || write_npy "$OUT/$model-x.npy" 4096 "$cols_in" 1; } ||
        ! { [ -s "$OUT/$model-y.npy" ] || write_npy "$OUT/$model-y.npy" 4096 "$cols_out" 2; }; then
        fail "$model data" "cannot write the .npy files (no numpy, no perl?)"
        continue
    fi
    throughput "$model" single 0
    throughput "$model" ddp "$ALL"
done
finish
