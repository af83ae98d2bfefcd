#!/bin/sh
# tests/gpu/check.sh: the whole GPU check, for a machine with one or more
# NVIDIA GPUs (CI has none; run this by hand where a GPU is lent).
#
#   sh tests/gpu/check.sh            from the repository root
#
# 1. builds with CUDA (make; fails if nvcc or the driver-less build is found),
# 2. runs the GPU unit suites (tests/unit/test_cuda.c, any test_*nccl*/*gpu*, and
#    tests/gpu/test_comm_nccl.c once comm.c is in the tree), and fails if
#    they skipped for want of a GPU,
# 3. trains 20 steps in every mode on the GPUs -- single on each visible GPU,
#    dp and ddp (NCCL) on all of them, ddp with one NCCL rank, and with one
#    GPU also dp --gpus 0,0 and ddp --gpus 0,0 --comm shm -- and compares the
#    final parameter checksums with single mode on the CPU (about 1e-4
#    relative: |d sum| and |d |sum|| against |sum| of the CPU run),
# 4. prints throughput for mlp-medium and mlp-large (single on GPU 0; ddp on
#    every GPU when there are several),
# and ends with one line, "gpu check: PASS (n/n)" or "gpu check: FAIL (...)",
# exiting 0 or 1.  Logs of every step are in build/gpu-check/.  About two
# minutes on one H200; every run is capped by RUN_LIMIT seconds.
#
# Environment: CUDA_VISIBLE_DEVICES is respected; JOBS (make -j, default
# nproc); RUN_LIMIT (default 240); TOL (default 1e-4).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=build/gpu-check
mkdir -p "$OUT"
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
RUN_LIMIT=${RUN_LIMIT:-240}
TOL=${TOL:-1e-4}
BIN=./ddpbench
T_START=$(date +%s)

npass=0
nfail=0
nskip=0
failed=""
skipped=""

pass() { npass=$((npass + 1)); echo "PASS  $*"; }
fail() { nfail=$((nfail + 1)); failed="$failed${failed:+, }$1"; echo "FAIL  $*"; }
skip() { nskip=$((nskip + 1)); skipped="$skipped${skipped:+, }$1"; echo "SKIP  $*"; }

finish() {
    total=$((npass + nfail))
    secs=$(( $(date +%s) - T_START ))
    extra=""
    [ "$nskip" -gt 0 ] && extra="; $nskip skipped: $skipped"
    if [ "$nfail" -eq 0 ] && [ "$total" -gt 0 ]; then
        echo "gpu check: PASS ($npass/$total$extra) in ${secs}s"
        exit 0
    fi
    echo "gpu check: FAIL ($nfail of $total failed: $failed$extra) in ${secs}s"
    exit 1
}

# Stop at once, with the summary line, when nothing after this can work.
abort() { fail "$1" "$2"; finish; }

show_tail() { echo "      --- last lines of $1 ---"; tail -n 15 "$1" | sed 's/^/      | /'; }

# ---- 1. build ----------------------------------------------------------------
echo "== build (make -j$JOBS)"
TEST_BINS=$(for t in tests/unit/test_*.c; do b=${t#tests/unit/}; echo "build/release/tests/unit/${b%.c}"; done)
# shellcheck disable=SC2086
if ! make -j"$JOBS" ddpbench $TEST_BINS >"$OUT/build.log" 2>&1; then
    show_tail "$OUT/build.log"
    abort build "make failed (log: $OUT/build.log)"
fi
grep -q '^CUDA: yes' "$OUT/build.log" ||
    grep -q 'HAVE_CUDA' build/release/flags.txt 2>/dev/null ||
    abort build "the build has no CUDA (is nvcc at \$CUDA_HOME/bin/nvcc? was NO_CUDA set?)"
pass build "$(grep -m1 '^CUDA:' "$OUT/build.log" || echo 'CUDA: yes (already built)'), $(grep -m1 '^NCCL:' "$OUT/build.log" || echo 'NCCL: see build/release/flags.txt')"

# ---- GPUs visible (the program's own probe, so CUDA_VISIBLE_DEVICES counts) ---
"$BIN" --mode single --backend auto --steps 1 --samples 64 --batch 32 --layers 4,4 --loss mse \
    >"$OUT/probe.log" 2>&1
NGPU=$(sed -n 's/.*(auto: \([0-9][0-9]*\) GPUs\{0,1\} visible).*/\1/p' "$OUT/probe.log" | head -n 1)
if [ -z "$NGPU" ]; then
    why=$(sed -n 's/.*(auto: no GPU, \(.*\)), devices.*/\1/p' "$OUT/probe.log" | head -n 1)
    abort probe "no GPU visible: ${why:-see $OUT/probe.log}"
fi
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
    sed 's/^/      gpu /'
pass probe "$NGPU GPU(s) visible${CUDA_VISIBLE_DEVICES+ (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)}"
ALL=$(i=0; l=""; while [ "$i" -lt "$NGPU" ]; do l="$l${l:+,}$i"; i=$((i + 1)); done; echo "$l")

# ---- 2. GPU unit suites ---------------------------------------------------------
run_suite() { # BINARY
    name=$(basename "$1")
    log="$OUT/$name.log"
    echo "== $name"
    if ! timeout "$RUN_LIMIT" "$1" --jobs 1 --verbose >"$log" 2>&1; then
        grep -E '^\[(FAIL|----)\]|Assertion|CRASH' "$log" | head -n 20 | sed 's/^/      /'
        fail "$name" "$(grep -m1 'Synthesis' "$log" || echo "exited non-zero, log $log")"
        return
    fi
    # A GPU is visible: a test that skipped for want of one means the suite
    # did not see it, which is a failure here.
    if grep -q 'SKIP.*no GPU' "$log"; then
        grep 'SKIP.*no GPU' "$log" | head -n 5 | sed 's/^/      /'
        fail "$name" "tests skipped with 'no GPU' although $NGPU GPU(s) are visible"
        return
    fi
    nsk=$(grep -c '\[SKIP\]' "$log")
    pass "$name" "$(grep -m1 'Synthesis' "$log" | sed 's/\[====\] //')$([ "$nsk" -gt 0 ] && echo " ($nsk skipped, see $log)")"
}

for t in $TEST_BINS; do
    case "$t" in *cuda* | *nccl* | *gpu*) run_suite "$t" ;; esac
done

# The NCCL suite lives here because it links comm.c (the DDP work's segment):
# built with the flags the build recorded, skipped while comm.c is absent.
if grep -q -- '-DHAVE_NCCL' build/release/flags.txt 2>/dev/null; then
    CCF=$(cut -d'|' -f1 build/release/flags.txt | sed 's/-MMD -MP//')
    LDL=$(cut -d'|' -f3 build/release/flags.txt)
    # shellcheck disable=SC2086,SC2046
    # (the run path finds libddpbench-cuda.so, which holds NCCL, in the build folder)
    if $CCF $(pkg-config --cflags criterion) -o "$OUT/test_comm_nccl" tests/gpu/test_comm_nccl.c \
        build/release/libddpbench.a $(pkg-config --libs criterion) $LDL \
        -Wl,-rpath,"$(pwd)/build/release" >"$OUT/test_comm_nccl.build.log" 2>&1; then
        run_suite "$OUT/test_comm_nccl"
    elif grep -q 'undefined reference to .comm_seg_create' "$OUT/test_comm_nccl.build.log"; then
        skip test_comm_nccl "common/comm.c (the shared segment, DDP work) is not in this tree"
    else
        show_tail "$OUT/test_comm_nccl.build.log"
        fail test_comm_nccl "does not build (log: $OUT/test_comm_nccl.build.log)"
    fi
else
    skip test_comm_nccl "built without NCCL"
fi

# ---- 3. every mode on the GPUs vs single on the CPU ------------------------------
# checksum line: "  checksum       sum +1.234567e+01  |sum| 1.234567e+03  bits ..."
checksum() { sed -n 's/^ *checksum *sum \([^ ]*\) *|sum| \([^ ]*\).*/\1 \2/p' "$1" | tail -n 1; }

# run LOG ARGS...: ddpbench with a time limit; 0 ok, 1 failed, 2 mode not built yet.
run() {
    log=$1
    shift
    timeout "$RUN_LIMIT" "$BIN" "$@" >"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'not built yet' "$log"; then
        return 2
    fi
    [ "$rc" -eq 124 ] && echo "ddpbench: timed out after ${RUN_LIMIT}s (RUN_LIMIT)" >>"$log"
    [ "$rc" -eq 0 ]
}

# CPU references, one per (config, batch), computed once.
cpu_ref() { # NAME BATCH -> echoes "sum abs" or nothing
    ref="$OUT/cpu-$1-b$2.log"
    if [ ! -s "$ref" ] || [ -z "$(checksum "$ref")" ]; then
        # shellcheck disable=SC2046
        run "$ref" --mode single --backend cpu --threads "$JOBS" --steps 20 --batch "$2" $(cfg_args "$1") --quiet ||
            return 1
    fi
    checksum "$ref"
}

cfg_args() {
    case "$1" in
    small) echo "--layers 32,128,128,10 --act relu --loss ce --dataset classes --optim adam --lr 0.001 --samples 4096" ;;
    gelu-sgd) echo "--layers 64,256,256,8 --act gelu --loss mse --optim sgd --lr 0.01 --momentum 0.9 --samples 4096" ;;
    esac
}

# compare LABEL CFG BATCH ARGS...: train 20 steps on the GPU(s), compare with the CPU.
compare() {
    label=$1 cfg=$2 batch=$3
    shift 3
    log="$OUT/$(echo "$label" | tr ' ,/' '__-').log"
    # shellcheck disable=SC2046
    run "$log" --steps 20 --batch "$batch" $(cfg_args "$cfg") --backend cuda "$@"
    case $? in
    0) ;;
    2) skip "$label" "$(grep -m1 'not built yet' "$log" | sed 's/^ddpbench: error: //')"; return ;;
    *) show_tail "$log"; fail "$label" "run failed (log: $log)"; return ;;
    esac
    ref=$(cpu_ref "$cfg" "$batch") || { fail "$label" "the CPU reference run failed ($OUT/cpu-$cfg-b$batch.log)"; return; }
    got=$(checksum "$log")
    verdict=$(echo "$ref $got $TOL" | awk '{
        d1 = $1 - $3; if (d1 < 0) d1 = -d1
        d2 = $2 - $4; if (d2 < 0) d2 = -d2
        s = $2 > 0 ? $2 : 1; r = (d1 > d2 ? d1 : d2) / s
        printf "%s rel %.2e (cpu sum %s |sum| %s, gpu sum %s |sum| %s)", (r <= $5 ? "ok" : "bad"), r, $1, $2, $3, $4 }')
    case "$verdict" in
    ok*) pass "$label" "${verdict#ok }" ;;
    *) fail "$label" "parameters differ from the CPU: ${verdict#bad } > $TOL" ;;
    esac
}

echo "== modes on the GPU vs single on the CPU (20 steps, tolerance $TOL)"
W=$NGPU
[ "$W" -lt 2 ] && W=2
B=$((32 * W)) # divisible by every world size used below
for cfg in small gelu-sgd; do
    i=0
    while [ "$i" -lt "$NGPU" ]; do
        compare "single gpu$i $cfg" "$cfg" "$B" --mode single --gpus "$i"
        i=$((i + 1))
    done
    compare "ddp nccl 1 rank $cfg" "$cfg" "$B" --mode ddp --comm nccl --gpus 0
    if [ "$NGPU" -ge 2 ]; then
        compare "dp gpus $ALL $cfg" "$cfg" "$B" --mode dp --gpus "$ALL"
        compare "ddp nccl gpus $ALL $cfg" "$cfg" "$B" --mode ddp --comm nccl --gpus "$ALL"
        compare "ddp shm gpus $ALL $cfg" "$cfg" "$B" --mode ddp --comm shm --gpus "$ALL"
    else
        compare "dp gpus 0,0 $cfg" "$cfg" "$B" --mode dp --gpus 0,0
        compare "ddp shm gpus 0,0 $cfg" "$cfg" "$B" --mode ddp --comm shm --gpus 0,0
    fi
done

# ---- 4. throughput ------------------------------------------------------------------
# The synthetic teachers of mlp-medium and mlp-large take minutes to generate
# on one core, so their data is random .npy files (perl, in every Debian and
# Ubuntu base system).  Throughput does not depend on the values.
write_npy() { # FILE ROWS COLS SEED: float32 uniform(-1, 1), C order
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

throughput() { # LABEL ARGS...
    label=$1
    shift
    log="$OUT/tput-$(echo "$label" | tr ' ,/' '__-').log"
    run "$log" --backend cuda "$@"
    case $? in
    0) pass "$label" "$(sed -n 's/^ *throughput *\([0-9.]*\) samples\/s.*/\1 samples\/s/p' "$log"), $(sed -n 's/^ *step time *mean \([^p]*\)p50.*/step mean \1/p' "$log" | sed 's/ *$//'), peak mem$(sed -n 's/.*peak mem[a-z]* *\(.*\)/ \1/p' "$log" | tr '\n' ' ' | sed 's/ *$//')" ;;
    2) skip "$label" "$(grep -m1 'not built yet' "$log" | sed 's/^ddpbench: error: //')" ;;
    *) show_tail "$log"; fail "$label" "run failed (log: $log)" ;;
    esac
}

echo "== throughput"
MEDIUM_DATA="--samples 4096"
LARGE_DATA="--samples 4096"
if command -v perl >/dev/null 2>&1 &&
    write_npy "$OUT/medium-x.npy" 4096 1024 1 && write_npy "$OUT/medium-y.npy" 4096 1024 2 &&
    write_npy "$OUT/large-x.npy" 4096 4096 1 && write_npy "$OUT/large-y.npy" 4096 4096 2; then
    MEDIUM_DATA="--data $OUT/medium-x.npy --targets $OUT/medium-y.npy"
    LARGE_DATA="--data $OUT/large-x.npy --targets $OUT/large-y.npy"
else
    echo "      (no perl: synthetic data, which takes minutes to generate for mlp-large)"
fi
# shellcheck disable=SC2086
throughput "mlp-medium single gpu0" --mode single --model mlp-medium $MEDIUM_DATA --steps 60 --warmup-steps 10 --gpus 0 --quiet
# shellcheck disable=SC2086
throughput "mlp-large single gpu0" --mode single --model mlp-large $LARGE_DATA --steps 20 --warmup-steps 4 --gpus 0 --quiet
if [ "$NGPU" -ge 2 ]; then
    LB=$((2048 - 2048 % NGPU)) # ddp needs the batch divisible by the ranks
    # shellcheck disable=SC2086
    throughput "mlp-large ddp gpus $ALL" --model mlp-large $LARGE_DATA --mode ddp --batch "$LB" --steps 20 --warmup-steps 4 --gpus "$ALL" --quiet
fi

finish
