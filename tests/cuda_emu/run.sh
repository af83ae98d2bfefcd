#!/bin/sh
# tests/cuda_emu/run.sh: the CUDA backend's code on an emulated GPU, for
# machines without one (make test-cuda-emu).
#
# Compiles common/device/backend_cuda.c, the probe, and the kernels_*.cu files (each
# launch rewritten into a call of emu_kernel.hpp's emu_launch) against a CPU
# emulation of the CUDA runtime and cuBLAS (this directory), with ASan and
# UBSan, links tests/unit/test_cuda.c against it and runs it with EMU_NGPU=2 and
# EMU_NGPU=1, then trains single, ddp and dp on emulated GPUs against single
# on the CPU, and checks that dp and ddp resume from a checkpoint bit for
# bit on them.  What it proves: the kernels' indexing, reductions and
# arithmetic, the row-major/column-major GEMM mapping, device binding on every
# thread, memory accounting, zeroing and the tests themselves.  What it cannot:
# stream ordering, real GPU rounding, cuBLAS itself, NCCL (comm_nccl.c is not
# built here), performance.  tests/gpu/check.sh does those on a real GPU.
# Flag lists below are split into words on purpose.
# shellcheck disable=SC2086,SC2046
set -eu
cd "$(dirname "$0")/../.."
E=tests/cuda_emu
B=build/cuda-emu
rm -rf "$B"
mkdir -p "$B"
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# DDPBENCH_CUDA_LINKED: the CUDA code is linked in here, not loaded as
# libddpbench-cuda.so (common/device/cuda_lib.h).
CFLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -DHAVE_CUDA -DDDPBENCH_CUDA_LINKED -I$E -Icommon -I. $(pkg-config --cflags openblas libcjson) -pthread $SAN"
LIBS="$(pkg-config --libs openblas libcjson) -lm -lpthread -lstdc++"

echo "cuda-emu: building into $B"
objs=""
for c in common/*/*.c dp/*.c ddp/*.c; do
    case "$c" in *_nccl.c) continue ;; esac
    o="$B/$(basename "$c" .c).o"
    cc $CFLAGS -c "$c" -o "$o"
    objs="$objs $o"
done
for cu in common/*/*.cu; do
    n=$(basename "$cu" .cu)
    # k<<<grid, block, shmem, stream>>>(args);  ->  emu_launch(grid, block, shmem, stream, [=]() { k(args); });
    perl -0777 -pe 's/(\w+)<<<(.*?)>>>\((.*?)\);/emu_launch($2, [=]() { $1($3); });/gs' "$cu" >"$B/$n.cpp"
    grep -q '<<<' "$B/$n.cpp" && { echo "cuda-emu: a launch in $cu was not rewritten" >&2; exit 1; }
    c++ -std=c++17 -O1 -g -Wall -Wextra -include "$E/emu_kernel.hpp" -I"$E" -Icommon $SAN -c "$B/$n.cpp" -o "$B/$n.o"
    objs="$objs $B/$n.o"
done
cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -I"$E" $SAN -c "$E/emu_runtime.c" -o "$B/emu_runtime.o"
ar rcs "$B/libddpbench-emu.a" $objs "$B/emu_runtime.o"
cc $CFLAGS $(pkg-config --cflags criterion) -o "$B/test_cuda" tests/unit/test_cuda.c "$B/libddpbench-emu.a" \
    $(pkg-config --libs criterion) $LIBS

export ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for n in 2 1; do
    echo "== test_cuda on $n emulated GPU(s)"
    # ASan warns once per process that it cannot follow ucontext switches
    # (the kernels' coroutines); that line is noise here.
    rc=0
    EMU_NGPU=$n "$B/test_cuda" --jobs 2 >"$B/test_cuda-$n.log" 2>&1 || rc=$?
    grep -v "ASan doesn't fully support makecontext" "$B/test_cuda-$n.log" || true
    [ "$rc" -eq 0 ] || { echo "cuda-emu: FAIL on $n emulated GPU(s) (log: $B/test_cuda-$n.log)"; exit 1; }
done
# The modes on emulated GPUs against single on the CPU: DDP's forked ranks
# each open their own emulated device, --comm shm stages through pinned
# memory, --gpus 0,0 shares one device.
cc $CFLAGS -o "$B/ddpbench" bench/main.c "$B/libddpbench-emu.a" $LIBS -lrt
checksum() { sed -n 's/^ *checksum *sum \([^ ]*\) *|sum| \([^ ]*\).*/\1 \2/p' "$1" | tail -n 1; }
ARGS="--layers 12,48,48,4 --act tanh --loss ce --dataset classes --samples 384 --batch 48 --steps 12 --quiet"
EMU_NGPU=2 "$B/ddpbench" --mode single --backend cpu $ARGS >"$B/ref.log" 2>&1 || { cat "$B/ref.log"; exit 1; }
ref=$(checksum "$B/ref.log")
for mode in "single --gpus 0" "ddp --comm shm --gpus 0,1" "ddp --comm shm --gpus 0,0" "dp --gpus 0,1" "dp --gpus 0,0"; do
    log="$B/mode.log"
    rc=0
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode $mode $ARGS >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'not built yet' "$log"; then
        echo "== $mode: skipped (not built yet in this tree)"
        continue
    fi
    [ "$rc" -eq 0 ] || { grep -v "ASan doesn't" "$log" | tail -n 20; echo "cuda-emu: FAIL: --mode $mode"; exit 1; }
    verdict=$(echo "$ref $(checksum "$log")" | awk '{ d1 = $1 - $3; if (d1 < 0) d1 = -d1
        d2 = $2 - $4; if (d2 < 0) d2 = -d2; r = (d1 > d2 ? d1 : d2) / $2
        printf "%s %.1e", (r <= 1e-5 ? "ok" : "bad"), r }')
    echo "== $mode on emulated GPUs vs single on the CPU: checksum ${verdict#* } relative"
    case "$verdict" in ok*) ;; *) echo "cuda-emu: FAIL: --mode $mode differs from the CPU"; exit 1 ;; esac
done
# Checkpoints on emulated GPUs: the optimizer state goes through the device
# download and upload, DP writes from device 0's thread, every DDP rank reads
# the file; the resumed run must end with the straight run's bits, with
# --trace and --explain recording along the way.
bits() { sed -n 's/.*checksum.* bits \([0-9a-f]*\).*/\1/p' "$1"; }
R="$ARGS --optim adam --lr 0.01"
for mode in "dp --gpus 0,1" "ddp --comm shm --gpus 0,1"; do
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode $mode $R >"$B/straight.log" 2>&1 || { tail -n 20 "$B/straight.log"; exit 1; }
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode $mode $R --steps 5 --checkpoint "$B/ck.safetensors" \
        >"$B/part.log" 2>&1 || { tail -n 20 "$B/part.log"; exit 1; }
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode $mode $R --resume "$B/ck.safetensors" \
        --trace "$B/trace.json" --explain >"$B/resumed.log" 2>&1 || { tail -n 20 "$B/resumed.log"; exit 1; }
    [ -n "$(bits "$B/straight.log")" ] && [ "$(bits "$B/straight.log")" = "$(bits "$B/resumed.log")" ] ||
        { echo "cuda-emu: FAIL: --mode $mode resumed to other bits"; exit 1; }
    echo "== $mode on emulated GPUs: stopped at 5, resumed to 12: the same bits"
done
echo "cuda-emu: passed"
