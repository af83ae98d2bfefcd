#!/bin/sh
# tests/cuda_emu/run.sh: the CUDA backend's code on an emulated GPU, for
# machines without one (make test-cuda-emu, part of make test).
#
# `make EMU=1` builds the program and tests/unit/test_cuda.c into
# build/cuda-emu with the release build's own flags (-O3, libmvec: the CPU
# side is exactly what users run) against a CPU emulation of the CUDA
# runtime, cuBLAS and NCCL (this directory) whose streams are asynchronous:
# each runs on its own host thread, and events and synchronisations really
# wait.  Then:
#  1. the emulator's stream capture and graphs (test_capture.c: recorded
#     work replays at each launch, a graph over two devices and threads
#     with each stream's part side by side; what CUDA refuses during a
#     capture -- a capturing thread's queries and waits of anything, another
#     thread's under a global capture, the legacy stream while a blocking
#     stream captures, ... -- is refused with CUDA's error, one test per
#     rule); test_cuda on 2 emulated GPUs, and on 1 with every queued op delayed at
#     random (EMU_JITTER_US), so the tests' own ordering is exercised (a
#     training step must make no cudaMalloc or cudaFree: the emulator counts
#     them); its TF32 test again with cuBLAS keeping an fp32 kernel
#     (EMU_TF32_AS_FP32); the NCCL suite (tests/gpu/test_comm_nccl.c) on 3;
#  2. single, dp (NCCL on 0,1 and 0,1,2; peer copies on 0,0), ddp --comm shm
#     (0,1 and 0,0) and ddp --comm nccl (2 and 3 ranks, and 3 with --zero 1, 2, 3:
#     reduce-scatter and all-gather, ZeRO-3 layer by layer), with and without
#     --accum, and --comm-hook fp16/bf16 over NCCL and shm, on emulated GPUs with
#     jitter and slow copies, against single on the CPU (1e-5), each holding
#     to at most one host synchronisation per step (--json:
#     host_syncs_per_step) -- two under shm, whose wait for the gradients'
#     copy to the host must be counted; and --report's page from dp and
#     ddp over NCCL there, at the same one host synchronisation per step;
#     and --precision bf16 in single, dp and ddp (shm, NCCL) against the
#     CPU's bf16 reference, each device's peak measured (its properties, a
#     cuBLAS GEMM at bf16) and its share plausible;
#  2b. CUDA graphs: single, ddp over NCCL (2 and 3 ranks; in bf16 single
#     and 3 ranks) and dp (one graph of every device: peer copies on 2 and 3,
#     50 rows on 3, NCCL on 2 and 3) replay with eager's bits, one graph
#     launch and at most one host sync per step; an NCCL that refuses to
#     capture (planted) runs eagerly under auto, saying why once, and ends an
#     `on` run, exit 1, in ddp and in dp (each device probes it); a dp device
#     failing inside a graph step ends the run (exit 1, one line); auto runs
#     dp over NCCL on distinct GPUs eagerly and says why;
#  3. under NCCL, a stalled rank and a killed one end the run with exit 1 and
#     a message naming them, in time, leaving no shared memory behind; the
#     scenarios of silent divergence as described, and --check-replicas
#     catching a planted drift over NCCL, ZeRO-1, graphs and dp; then
#     ddp --comm nccl with ranks started by mpirun (2 and 3) against the CPU,
#     and a killed rank there;
#  4. single, dp on 0,0 and ddp over NCCL (CUDA graphs), dp and ddp over shm resume
#     from a checkpoint bit for bit on emulated GPUs, checkpoints written
#     every 2 steps;
#  5. a planted missing wait -- the compute stream no longer waits for a
#     staged batch's copy -- must make single differ from the CPU: the proof
#     that the emulator catches an ordering bug; and a planted missing join
#     of the comm stream back into ddp's graph capture, or of dp's devices
#     back into device 0's, must fail the run, as must a dp member that ends
#     device 0's capture;
#  6. the kernel tests again under ASan + UBSan (make EMU=1 SAN=address).
# What it cannot prove: real GPU rounding, cuBLAS and NCCL themselves,
# performance.  tests/gpu/check.sh does those on a real GPU.
# `sh tests/cuda_emu/run.sh --build` only builds (both builds above), so
# that make test can build them while other suites run.
# shellcheck disable=SC2086 # flag and option lists are meant to split
set -eu
cd "$(dirname "$0")/../.."
B=build/cuda-emu
BA=build/cuda-emu-address
JOBS=${JOBS:-2}
fail() {
    echo "cuda-emu: FAIL: $*"
    exit 1
}
# Under make (make test builds this ahead: sh run.sh --build), its job slots;
# else JOBS of our own.
case "${MAKEFLAGS:-}" in *jobserver*) J= ;; *) J=-j$JOBS ;; esac

echo "== make EMU=1 (the release flags, emulated GPU)"
# shellcheck disable=SC2086 # J is empty or one word
make -s $J EMU=1 "$B/ddpbench" "$B/tests/unit/test_cuda" "$B/tests/gpu/test_comm_nccl" "$B/tests/cuda_emu/test_capture" \
    >"$B.build.log" 2>&1 || { tail -n 30 "$B.build.log"; fail "the emulated build failed"; }
build_asan() {
    echo "== make EMU=1 SAN=address"
    # shellcheck disable=SC2086
    make -s $J EMU=1 SAN=address "$BA/tests/unit/test_cuda" >"$BA.build.log" 2>&1 ||
        { tail -n 30 "$BA.build.log"; fail "the ASan build failed"; }
}
if [ "${1:-}" = --build ]; then
    build_asan
    exit 0
fi

# ---- 1. the CUDA unit suite ----------------------------------------------------
# The emulator's stream capture first: what the graphs below stand on.
log="$B/test_capture.log"
EMU_NGPU=2 "$B/tests/cuda_emu/test_capture" --jobs 2 >"$log" 2>&1 ||
    { grep -E 'Assert|FAIL|CRASH|cuda_emu' "$log" | head -n 20; fail "test_capture (log: $log)"; }
echo "== stream capture and graphs on the emulator: $(tail -n 1 "$log")"
# The CPU-against-GPU trainings (cuda_equivalence, single on GPU 0: most of
# the suite's time) run once, in the jittered run, the harsher of the two;
# the 2-GPU run has the tests that need two.
for cfg in "2 0 !(cuda_equivalence)/*" "1 200 */*"; do
    set -f # the filters are Criterion's patterns, not the shell's
    set -- $cfg
    set +f
    n=$1 jitter=$2 only=$3
    echo "== test_cuda on $n emulated GPU(s), EMU_JITTER_US=$jitter, tests $only"
    log="$B/test_cuda-$n.log"
    EMU_NGPU=$n EMU_JITTER_US=$jitter "$B/tests/unit/test_cuda" --jobs 2 --filter "$only" >"$log" 2>&1 ||
        { grep -E 'Assert|FAIL|CRASH|cuda_emu' "$log" | head -n 20; fail "test_cuda on $n emulated GPU(s) (log: $log)"; }
    tail -n 1 "$log"
done
# TF32 math allows tensor cores but does not force them: the TF32 test must
# hold when cuBLAS keeps an fp32 kernel (as it may for a small product).
log="$B/test_cuda-tf32-as-fp32.log"
EMU_NGPU=1 EMU_TF32_AS_FP32=1 "$B/tests/unit/test_cuda" --filter 'cuda_kernels/tf32*' >"$log" 2>&1 ||
    { grep -E 'Assert|FAIL|CRASH|cuda_emu' "$log" | head -n 20; fail "the TF32 test when cuBLAS picks an fp32 kernel (log: $log)"; }
echo "== test_cuda's TF32 test with cuBLAS keeping an fp32 kernel (EMU_TF32_AS_FP32): $(tail -n 1 "$log")"
echo "== test_comm_nccl on 3 emulated GPUs"
log="$B/test_comm_nccl.log"
EMU_NGPU=3 timeout 300 "$B/tests/gpu/test_comm_nccl" --jobs 2 >"$log" 2>&1 ||
    { grep -E 'Assert|FAIL|CRASH|cuda_emu' "$log" | head -n 20; fail "test_comm_nccl (log: $log)"; }
tail -n 1 "$log"

# ---- 2. the modes against the CPU, one host sync per step ----------------------
# From --json: "checksum":{"sum":S,"abs_sum":A  and the run's host_syncs_per_step
# (the last key of that name: the devices' come before it).
sums() { sed -n 's/.*"checksum":{"sum":\([^,]*\),"abs_sum":\([^,]*\),.*/\1 \2/p' "$1"; }
syncs() { sed -n 's/.*"host_syncs_per_step":\([^,}]*\).*/\1/p' "$1"; }
# launches_per_step (the run's: the last key of that name) and the graph launches of its split
launches() { sed -n 's/.*"launches_per_step":\([^,}]*\).*/\1/p' "$1"; }
graphs() { sed -n 's/.*"graphs":\([^,}]*\).*/\1/p' "$1"; }
# the parameters' hash ("bits"): a run ends bit for bit like another
bits() { sed -n 's/.*"bits":"\([0-9a-f]*\)".*/\1/p' "$1"; }
# same_bits A B: run A's --json has bits, and they are run B's
same_bits() { [ -n "$(bits "$1")" ] && [ "$(bits "$1")" = "$(bits "$2")" ]; }
rel() { # "cpu_sum cpu_abs emu_sum emu_abs" -> relative difference
    echo "$1" | awk '{ d1 = $1 - $3; if (d1 < 0) d1 = -d1; d2 = $2 - $4; if (d2 < 0) d2 = -d2
        printf "%.1e", (d1 > d2 ? d1 : d2) / $2 }'
}
ARGS="--layers 12,48,48,4 --act tanh --loss ce --dataset classes --samples 384 --batch 48 --steps 12 --json"
for accum in 1 2; do
    # Without --accum the loss is fetched on the epochs' last steps only (a
    # step whose collectives differ from the one before); with it, on every
    # step.
    [ "$accum" = 2 ] && ARGS="$ARGS --log-every 1"
    ref="$B/ref-$accum.json"
    ./ddpbench --mode single --backend cpu $ARGS --accum $accum >"$ref" 2>"$ref.err" || fail "the CPU reference"
    for mode in "single --gpus 0" "dp --gpus 0,1" "dp --gpus 0,1,2" "dp --gpus 0,0" "ddp --comm shm --gpus 0,1" \
        "ddp --comm shm --gpus 0,0" "ddp --comm nccl --gpus 0,1" "ddp --comm nccl --gpus 0,1,2" \
        "ddp --comm nccl --gpus 0,1,2 --zero1" "ddp --comm nccl --gpus 0,1,2 --zero 2" \
        "ddp --comm nccl --gpus 0,1,2 --zero 3"; do
        log="$B/mode.json"
        EMU_NGPU=3 EMU_JITTER_US=100 EMU_COPY_DELAY_US=500 "$B/ddpbench" --backend cuda --mode $mode \
            $ARGS --accum $accum >"$log" 2>"$log.err" || { tail -n 20 "$log.err"; fail "--mode $mode --accum $accum"; }
        r=$(rel "$(sums "$ref") $(sums "$log")")
        n=$(syncs "$log")
        L=$(launches "$log")
        echo "== $mode --accum $accum on emulated GPUs: $r from the CPU, $n host syncs and $L launches per step"
        # eager: at least the layers' kernels; single, ddp over NCCL
        # (without ZeRO) and dp on peer copies replay their steps as CUDA
        # graphs (--cuda-graph auto, without --accum): the graph and the
        # batch's two copies
        gl=$(graphs "$log")
        case "$mode $accum" in
        "single"*" 1" | "ddp --comm nccl --gpus 0,1 1" | "ddp --comm nccl --gpus 0,1,2 1" | "dp --gpus 0,0 1")
            want='l <= 4 && g >= 0.8' ;;
        *) want='l >= 10 && g == 0' ;;
        esac
        awk -v l="$L" -v g="$gl" "BEGIN { exit !(l != \"\" && l != \"null\" && g != \"\" && $want) }" ||
            fail "--mode $mode --accum $accum: launches_per_step is '$L', graph launches '$gl' (want $want)"
        awk -v r="$r" 'BEGIN { exit !(r <= 1e-5) }' || fail "--mode $mode --accum $accum differs from the CPU by $r"
        # shm on a GPU: the host also waits, once a step, for the gradients'
        # copy to the host that the comm thread reduces -- counted: one more
        # than the step's own
        case "$mode" in *"comm shm"*) lo=2 hi=2 ;; *) lo=0 hi=1 ;; esac
        awk -v n="$n" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(n != "" && n >= lo && n <= hi) }' ||
            fail "--mode $mode --accum $accum waited for the GPU $n times per step (from $lo to $hi)"
    done
done

# ---- 2b. CUDA graphs --------------------------------------------------------------
# single and ddp over NCCL (2 and 3 ranks: each rank's step -- the buckets'
# all-reduces on the comm stream and the loss's among them -- one graph
# launch) with --cuda-graph on end with eager's bits (SGD with momentum, AdamW
# whose bias corrections change every step), one graph launch and at most one
# host wait per step (with 400 samples each epoch ends in a short batch, run
# eagerly between replays: 11 graph launches in 12 timed steps); in bf16 too
# (the operands' conversions and the roundings captured with the GEMMs:
# AdamW, single and 3 ranks); a mode that cannot qualify is refused with exit 2.
G="--layers 12,48,48,4 --act tanh --loss ce --dataset classes --batch 48 --steps 14 --json"
# graph_pair WHAT WANT ARGS...: ARGS eagerly, then with graphs: the same bits,
# and from WANT to 1 graph launches and at most 1 host sync per step.
graph_pair() {
    what=$1 want=$2
    shift 2
    for g in off on; do
        EMU_NGPU=3 EMU_JITTER_US=100 EMU_COPY_DELAY_US=300 "$B/ddpbench" --backend cuda "$@" --cuda-graph $g \
            >"$B/graph-$g.json" 2>"$B/graph-$g.err" || { tail -n 5 "$B/graph-$g.err"; fail "$what --cuda-graph $g"; }
    done
    same_bits "$B/graph-on.json" "$B/graph-off.json" ||
        fail "$what: graph replay ended with other bits than eager"
    grep -q '"cuda_graph":"on"' "$B/graph-on.json" || fail "$what --cuda-graph on: the run says it ran without graphs"
    n=$(syncs "$B/graph-on.json") gl=$(graphs "$B/graph-on.json") L=$(launches "$B/graph-on.json")
    awk -v n="$n" -v g="$gl" -v w="$want" 'BEGIN { exit !(n != "" && n <= 1 && g != "" && g >= w && g <= 1) }' ||
        fail "$what --cuda-graph on: $gl graph launches and $n host syncs per step (want $want and <= 1)"
    echo "== $what --cuda-graph on: eager's bits, $gl graph launches, $L launches and $n host syncs per step (off: $(launches "$B/graph-off.json") launches)"
}
for prec in fp32 bf16; do
    for case in "400 0.88 sgd --momentum 0.9 --nesterov" "384 1 adamw"; do
        set -- $case
        samples=$1 want=$2
        shift 2
        [ "$prec" = bf16 ] && [ "$1" != adamw ] && continue
        for mode in "single --gpus 0" "ddp --comm nccl --gpus 0,1" "ddp --comm nccl --gpus 0,1,2"; do
            [ "$prec" = bf16 ] && [ "$mode" = "ddp --comm nccl --gpus 0,1" ] && continue
            graph_pair "$mode --precision $prec --optim $*" "$want" --mode $mode $G --precision $prec \
                --samples "$samples" --optim "$@"
            grep -q "\"precision\":\"$prec\"" "$B/graph-on.json" || fail "$mode --precision $prec: --json says otherwise"
        done
    done
done
# An NCCL that cannot capture (EMU_NCCL_REFUSE_CAPTURE: ncclInvalidUsage for an
# all-reduce on a capturing stream, here on rank 1 alone).  The ranks' start-up
# probe finds it before anything trains: under auto every rank runs eagerly,
# to eager's bits (the last pair above: 3 ranks, AdamW, bf16), and rank 1's
# reason is said once on stderr and in --json; under on it ends the run, exit
# 1, one line naming rank 1.  Without the probe the refusal came at the
# first graph step and failed the run: EMU_NCCL_REFUSE_CAPTURE=2 lets the
# probe's capture pass and refuses the step's, as such a run met it.
P="--mode ddp --comm nccl --gpus 0,1,2 $G --precision bf16 --samples 384 --optim adamw"
EMU_NGPU=3 EMU_NCCL_REFUSE_CAPTURE=1 EMU_NCCL_REFUSE_RANK=1 "$B/ddpbench" --backend cuda $P >"$B/graph-refused.json" \
    2>"$B/graph-refused.err" || { tail -n 5 "$B/graph-refused.err"; fail "auto where NCCL refuses to capture"; }
same_bits "$B/graph-refused.json" "$B/graph-off.json" &&
    [ "$(graphs "$B/graph-refused.json")" = 0 ] && grep -q '"cuda_graph":"off"' "$B/graph-refused.json" &&
    grep -q '"cuda_graph_refused":"rank 1 (device 1): NCCL refused to capture an all-reduce: invalid usage' "$B/graph-refused.json" &&
    [ "$(grep -c 'ddpbench: note: --cuda-graph auto: rank 1 (device 1): NCCL refused' "$B/graph-refused.err")" = 1 ] ||
    fail "auto where NCCL refuses to capture: not eager's bits, or not said once: $(grep -o '"cuda_graph[^,]*' "$B/graph-refused.json") $(grep -c note "$B/graph-refused.err") notes"
echo "== --cuda-graph auto where rank 1's NCCL refuses to capture: eager steps, eager's bits, the reason said once"
rc=0
EMU_NGPU=3 EMU_NCCL_REFUSE_CAPTURE=1 EMU_NCCL_REFUSE_RANK=1 "$B/ddpbench" --backend cuda $P --cuda-graph on \
    >/dev/null 2>"$B/graph-refused.err" || rc=$?
[ "$rc" = 1 ] && [ "$(grep -c '^ddpbench: error: ' "$B/graph-refused.err")" = 1 ] &&
    grep -q '^ddpbench: error: rank 1 (device 1): --cuda-graph on: NCCL refused to capture' "$B/graph-refused.err" ||
    fail "--cuda-graph on where NCCL refuses to capture: exit $rc, $(grep error "$B/graph-refused.err")"
rc=0
EMU_NGPU=3 EMU_NCCL_REFUSE_CAPTURE=2 EMU_NCCL_REFUSE_RANK=1 "$B/ddpbench" --backend cuda $P >/dev/null \
    2>"$B/graph-refused.err" || rc=$?
[ "$rc" = 1 ] && grep -q '^ddpbench: error: rank 1 (device 1): NCCL all-reduce of bucket 0: invalid usage' "$B/graph-refused.err" ||
    fail "a refusal after the probe: exit $rc, $(grep error "$B/graph-refused.err")"
echo "== --cuda-graph on there: exit 1 naming rank 1; a refusal the probe did not see fails the run, exit 1"
# Uneven data under --join: rank 1 runs out 3 steps before rank 0 each epoch
# and shadows them (eager steps, the same on every rank), still taking its
# staging slot's turn, so the graphs it replays after read their own slots.
for g in off on; do
    EMU_NGPU=2 EMU_JITTER_US=100 "$B/ddpbench" --backend cuda --mode ddp --comm nccl --gpus 0,1 $G --samples 384 \
        --rank-samples 200,130 --optim adamw --cuda-graph $g >"$B/graph-$g.json" 2>"$B/graph-$g.err" ||
        { tail -n 5 "$B/graph-$g.err"; fail "ddp --rank-samples 200,130 --cuda-graph $g"; }
done
gl=$(graphs "$B/graph-on.json")
same_bits "$B/graph-on.json" "$B/graph-off.json" &&
    awk -v g="$gl" 'BEGIN { exit !(g != "" && g >= 0.6 && g < 1) }' ||
    fail "ddp --rank-samples 200,130 --cuda-graph on: bits $(bits "$B/graph-on.json") (eager $(bits "$B/graph-off.json")), $gl graph launches per step"
echo "== ddp --rank-samples 200,130 (shadow steps under --join) --cuda-graph on: eager's bits, $gl graph launches per step"
# dp: one graph of every device (common/train/graph.c), on peer copies
# (--gpus 0,0 and 0,0,0; the modes above show auto capturing 0,0) and over
# NCCL (0,1 and 0,1,2), with 50 rows on 3 devices (chunks of 17, 17, 16)
# and bf16 among them: graph_pair's proofs, and under a third of eager's
# launches.
for case in "0,0 48 400 0.88 sgd --momentum 0.9" "0,0,0 48 384 1 adamw" "0,0,0 50 400 1 sgd --momentum 0.9" \
    "0,1 48 400 0.88 sgd --momentum 0.9" "0,1,2 48 384 1 adamw" "0,0 48 384 1 adamw --precision bf16"; do
    set -- $case
    gpus=$1 batch=$2 samples=$3 want=$4
    shift 4
    graph_pair "dp --gpus $gpus --batch $batch --optim $*" "$want" --mode dp --gpus $gpus $G --batch $batch \
        --samples $samples --optim "$@"
    L=$(launches "$B/graph-on.json") L0=$(launches "$B/graph-off.json")
    awk -v l="$L" -v l0="$L0" 'BEGIN { exit !(l != "" && l0 != "" && l * 3 < l0) }' ||
        fail "dp --gpus $gpus --batch $batch: $L launches per step with graphs, $L0 eager (want under a third)"
done
# A device that fails inside a graph step (the capture, a replay; peer
# copies and NCCL): one line naming it, exit 1, no hang.
for f in 0,0,0:error:1:1 0,0,0:error:2:4 0,1,2:error:1:1 0,1,2:error:2:4; do
    gpus=${f%%:*} f=${f#*:}
    d=$(echo "$f" | cut -d: -f2) step=${f##*:}
    rc=0
    EMU_NGPU=3 DDPBENCH_FAULT=$f timeout 60 "$B/ddpbench" --backend cuda --mode dp --gpus $gpus $G --samples 384 \
        --cuda-graph on --quiet >"$B/graph.err" 2>&1 || rc=$?
    [ "$rc" = 1 ] && [ "$(grep -c . "$B/graph.err")" = 1 ] &&
        grep -Eq "^ddpbench: error: device $d( \(id 0\))?: injected fault at step $step\$" "$B/graph.err" ||
        { cat "$B/graph.err"; fail "dp --gpus $gpus --cuda-graph on, fault $f: exit $rc"; }
done
echo "== dp --cuda-graph on: a device failing in the capture or a replay ends the run, exit 1, one line"
# dp over NCCL with graphs on: before anything trains every device thread
# probes NCCL's capture (the policy ddp's ranks follow, common/train/
# graph.c), so an NCCL that refuses (device 1's) ends the run there:
# exit 1, one line naming the device and the reason.  Without the probe the
# refusal came at the first graph step's broadcast, mid-training: what
# EMU_NCCL_REFUSE_CAPTURE=2 still plants (the probe passes, the step's
# collective is refused), exit 1 naming device 1 too.  --timeout 120, past
# the run's own bound: devices left waiting in the refusing device's
# agreement (their communicators never aborted, or an abort waiting for the
# probe's graph) hang it, never end it by their watch.
say="invalid usage: emulated NCCL: EMU_NCCL_REFUSE_CAPTURE: this NCCL does not capture collectives"
for n in "1 device 1: --cuda-graph on: NCCL refused to capture an all-reduce: $say" \
    "2 device 1: NCCL broadcast of the parameters: $say"; do
    rc=0
    EMU_NGPU=3 EMU_NCCL_REFUSE_CAPTURE=${n%% *} EMU_NCCL_REFUSE_RANK=1 timeout 60 "$B/ddpbench" --backend cuda \
        --mode dp --gpus 0,1,2 $G --samples 384 --cuda-graph on --timeout 120 --quiet >/dev/null 2>"$B/graph.err" || rc=$?
    [ "$rc" = 1 ] && [ "$(cat "$B/graph.err")" = "ddpbench: error: ${n#* }" ] ||
        { cat "$B/graph.err"; fail "dp over NCCL --cuda-graph on, EMU_NCCL_REFUSE_CAPTURE=${n%% *} on device 1: exit $rc"; }
done
echo "== dp over NCCL --cuda-graph on where device 1's NCCL refuses to capture: the probe ends the run, exit 1, one line"
# auto runs dp over NCCL on distinct GPUs eagerly, and says why
EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode dp --gpus 0,1 $G --steps 2 >"$B/graph.json" 2>"$B/graph.err" ||
    fail "dp --gpus 0,1 --cuda-graph auto"
grep -q '"cuda_graph":"off"' "$B/graph.json" && grep -q "cuda graphs: off: dp over NCCL on distinct GPUs runs eagerly" "$B/graph.err" ||
    fail "dp --gpus 0,1 --cuda-graph auto: not eager, or the banner does not say why"
rc=0
EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode dp --gpus 0,1 $G --accum 2 --cuda-graph on >/dev/null 2>"$B/graph.err" || rc=$?
[ "$rc" = 2 ] && grep -q '^ddpbench: error: --cuda-graph on: ' "$B/graph.err" ||
    fail "--cuda-graph on where the step cannot qualify: exit $rc, $(cat "$B/graph.err")"

# A driver older than the runtime (cudaDriverGetVersion against
# CUDART_VERSION) is named as such, not as a missing driver: --backend cuda
# refuses with the branch it needs, auto falls back to the CPU saying why.
rc=0
EMU_DRIVER_VERSION=12040 "$B/ddpbench" --backend cuda --mode single $G --steps 1 >/dev/null 2>"$B/olddrv.err" || rc=$?
[ "$rc" = 2 ] && grep -q '^ddpbench: error: --backend cuda: no GPU: driver too old for CUDA 13 (needs R580 or newer), found R5' "$B/olddrv.err" ||
    fail "a CUDA 12.4 driver: exit $rc, $(cat "$B/olddrv.err")"
EMU_DRIVER_VERSION=12040 "$B/ddpbench" --backend auto --mode single $G --steps 1 >/dev/null 2>"$B/olddrv.err" &&
    grep -q 'driver too old for CUDA 13' "$B/olddrv.err" || fail "auto on a CUDA 12.4 driver: $(cat "$B/olddrv.err")"
echo "== a CUDA 12.4 driver: 'driver too old for CUDA 13 (needs R580 or newer)', exit 2 with --backend cuda"

# --precision bf16: the modes on emulated GPUs (cublasGemmEx on bf16
# operands, the kernels' roundings) against the CPU's bf16 reference.  This
# short tanh job drifts little: measured 7e-11 to 4e-10 on the checksum's sums, while
# the same job in fp32 ends 1.9e-5 away; so 1e-6 holds every mode to bf16
# and would catch one that ran fp32 (docs/gpu.md states the bf16 tolerance
# on the parameters themselves: test_bf16, test_cuda's cuda_equivalence).
ref="$B/ref-bf16.json"
./ddpbench --mode single --backend cpu $ARGS --precision bf16 >"$ref" 2>"$ref.err" || fail "the CPU's bf16 reference"
for mode in "single --gpus 0" "dp --gpus 0,1" "ddp --comm shm --gpus 0,1" "ddp --comm nccl --gpus 0,1,2"; do
    log="$B/mode.json"
    EMU_NGPU=3 EMU_JITTER_US=100 "$B/ddpbench" --backend cuda --mode $mode $ARGS --precision bf16 >"$log" 2>"$log.err" ||
        { tail -n 20 "$log.err"; fail "--mode $mode --precision bf16"; }
    r=$(rel "$(sums "$ref") $(sums "$log")")
    n=$(syncs "$log")
    grep -q '"precision":"bf16"' "$log" || fail "--mode $mode --precision bf16: --json does not say bf16"
    # the peak on a GPU (its properties, a cuBLAS GEMM at bf16) is measured and
    # the share plausible; the emulated GPU's figures mean nothing
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not all(
        x["peak_flops_per_s"] > 0 and 0 < x["peak_share"] <= 1.2 for x in d["devices"]))' "$log" ||
        fail "--mode $mode --precision bf16: no peak or share of it in --json"
    echo "== $mode --precision bf16 on emulated GPUs: $r from the CPU's bf16, $n host syncs per step"
    awk -v r="$r" 'BEGIN { exit !(r <= 1e-6) }' || fail "--mode $mode --precision bf16 differs from the CPU's bf16 by $r"
    case "$mode" in *"comm shm"*) hi=2 ;; *) hi=1 ;; esac
    awk -v n="$n" -v hi="$hi" 'BEGIN { exit !(n != "" && n <= hi) }' ||
        fail "--mode $mode --precision bf16 waited for the GPU $n times per step (at most $hi)"
done

# --comm-hook fp16 / bf16 on emulated GPUs: the CUDA cast kernels, NCCL's
# ncclHalf / ncclBfloat16 sums (emulated in rank order, as shm sums) and the
# staged shm path.  NCCL and shm on the emulated GPUs must agree bit for bit
# (the same casts, the same additions in the same order); against the CPU
# within docs/modes.md's 16-bit bound 2 (w+1) u R with R <= 1 here (a
# 1-ulp fp32 difference may flip a 16-bit rounding).
HARGS="--layers 12,48,48,4 --act tanh --loss ce --dataset classes --samples 384 --batch 48 --steps 12 --json --quiet"
for h in "fp16 0.00048828125" "bf16 0.00390625"; do
    u=${h#* } h=${h% *}
    ./ddpbench --mode ddp --backend cpu --gpus 0,1,2 --comm-hook $h $HARGS >"$B/hook-cpu.json" 2>"$B/hook.err" ||
        { cat "$B/hook.err"; fail "--comm-hook $h on the CPU"; }
    for c in nccl shm; do
        EMU_NGPU=3 EMU_JITTER_US=100 "$B/ddpbench" --backend cuda --mode ddp --comm $c --gpus 0,1,2 \
            --comm-hook $h $HARGS >"$B/hook-$c.json" 2>"$B/hook.err" || { tail -n 20 "$B/hook.err"; fail "--comm $c --comm-hook $h"; }
    done
    [ "$(sums "$B/hook-nccl.json")" = "$(sums "$B/hook-shm.json")" ] ||
        fail "--comm-hook $h: NCCL ($(sums "$B/hook-nccl.json")) and shm ($(sums "$B/hook-shm.json")) differ on emulated GPUs"
    r=$(rel "$(sums "$B/hook-cpu.json") $(sums "$B/hook-nccl.json")")
    echo "== ddp --comm-hook $h over NCCL on 3 emulated GPUs: shm's bits, $r from the CPU"
    awk -v r="$r" -v u="$u" 'BEGIN { exit !(r <= 2 * 4 * u) }' || fail "--comm-hook $h differs from the CPU by $r"
done
EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode ddp --gpus 0,1 --comm-hook powersgd:1 $HARGS >/dev/null 2>"$B/hook.err" &&
    fail "--comm-hook powersgd on CUDA did not fail"
grep -q "ddpbench: error: --comm-hook powersgd: the CPU backend only" "$B/hook.err" ||
    fail "--comm-hook powersgd on CUDA: $(cat "$B/hook.err")"

# --report on emulated GPUs: the recorders the page draws from add no host
# wait (still one per step), and the page holds every device's two lanes,
# DP's copies (eager over NCCL, and in graph steps on 0,0) and DDP's buckets
# waiting for the comm stream
for mode in "dp --gpus 0,1" "dp --gpus 0,0" "ddp --comm nccl --gpus 0,1"; do
    log="$B/page.json"
    rm -f "$B/page.html"
    EMU_NGPU=2 EMU_JITTER_US=100 "$B/ddpbench" --backend cuda --mode $mode $ARGS \
        --report "$B/page.html" >"$log" 2>"$log.err" || { tail -n 20 "$log.err"; fail "--mode $mode --report"; }
    n=$(syncs "$log")
    lanes=$(grep -c '<g class="lane"' "$B/page.html")
    echo "== $mode --report on emulated GPUs: $lanes lanes, $n host syncs per step"
    awk -v n="$n" 'BEGIN { exit !(n != "" && n <= 1) }' || fail "--mode $mode --report: $n host syncs per step"
    [ "$lanes" = 4 ] || fail "--mode $mode --report: $lanes timeline lanes, want 4"
    case $mode in
    ddp*) grep -q 'for the comm stream' "$B/page.html" || fail "--report: no bucket waits for the stream" ;;
    dp*) grep -q 'data-kind="gather"' "$B/page.html" || fail "--report: no DP copies" ;;
    esac
done

# ---- 3. faults under NCCL ----------------------------------------------------------
# A stalled rank: the others' next host wait polls the comm's watch, which
# gives up at --timeout; a killed rank: the supervisor stops the rest.
# Our runs' segments only (EMU_NCCL_SHM_TAG): another test's runs on the same
# machine may hold theirs meanwhile.
export EMU_NCCL_SHM_TAG="run$$"
emu_segments() { find /dev/shm -maxdepth 1 -name "ddpbench-emunccl-$EMU_NCCL_SHM_TAG-*" | wc -l; }
shm_before=$(emu_segments)
for f in "stall:1:3 timed out in all-reduce" "kill:0:4 rank 0 (device 0) killed by signal 9"; do
    fault=${f%% *} want=${f#* }
    log="$B/fault.log"
    t0=$(date +%s)
    rc=0
    EMU_NGPU=2 DDPBENCH_FAULT=$fault timeout 60 "$B/ddpbench" --backend cuda --mode ddp --comm nccl \
        --gpus 0,1 --timeout 2 ${ARGS% --json*} --quiet >"$log" 2>&1 || rc=$?
    secs=$(($(date +%s) - t0))
    [ "$rc" -eq 1 ] || { cat "$log"; fail "fault $fault under NCCL: exit $rc, not 1"; }
    grep -q "$want" "$log" || { cat "$log"; fail "fault $fault under NCCL: no '$want'"; }
    # the emulated NCCL's end of a communicator freed while graphs hold it (a hang on GPUs)
    ! grep -q '^cuda_emu: ' "$log" || { cat "$log"; fail "fault $fault under NCCL: $(grep -m1 '^cuda_emu: ' "$log")"; }
    [ "$secs" -le 20 ] || fail "fault $fault under NCCL took ${secs}s (--timeout 2)"
    echo "== fault $fault under NCCL: exit 1 in ${secs}s: $(tail -n 1 "$log")"
done
[ "$(emu_segments)" = "$shm_before" ] || fail "NCCL runs left shared memory behind"

# ---- 3a. silent divergence on emulated GPUs ---------------------------------------
# Every scenario of silent divergence as described over NCCL (no-sync's
# --check-replicas, collective-at-runtime's timeout naming each rank's
# collective); a planted one-ulp drift caught by --check-replicas over NCCL,
# ZeRO-1, CUDA graphs and dp's peer copies, at the step it is due.
for sc in set-epoch loss-scale no-sync unused collective-at-runtime bucket-view; do
    log="$B/scenario-$sc.log"
    EMU_NGPU=4 EMU_JITTER_US=100 timeout 120 "$B/ddpbench" --scenario $sc --backend cuda >"$log" 2>&1 ||
        { cat "$log"; fail "--scenario $sc --backend cuda: exit $?"; }
    echo "== --scenario $sc on emulated GPUs: $(tail -n 1 "$log")"
done
R="--backend cuda --layers 16,64,64,4 --loss mse --samples 600 --batch 60 --steps 10 --lr 1e-4 --quiet"
for a in "ddp --gpus 0,1,2" "ddp --gpus 0,1,2 --zero 1" "ddp --gpus 0,1,2 --cuda-graph on" \
    "dp --gpus 0,1,2 --cuda-graph on" "dp --gpus 0,0"; do
    log="$B/replicas.log"
    # shellcheck disable=SC2086
    EMU_NGPU=3 timeout 120 "$B/ddpbench" $R --mode $a --check-replicas 2 >"$log" 2>&1 ||
        { cat "$log"; fail "--mode $a --check-replicas 2: a run without a change tripped it"; }
    rc=0
    # shellcheck disable=SC2086
    EMU_NGPU=3 DDPBENCH_FAULT=ulp:1:5 timeout 120 "$B/ddpbench" $R --mode $a --check-replicas 2 >"$log" 2>&1 || rc=$?
    [ $rc -eq 1 ] && grep -q "the replicas differ after step 6 (--check-replicas 2): \(rank\|device\) 1's layer 2 weight" "$log" ||
        { cat "$log"; fail "--mode $a: the planted drift was not caught (exit $rc)"; }
done
echo "== --check-replicas on emulated GPUs: a planted drift caught, unchanged runs untouched"
[ "$(emu_segments)" = "$shm_before" ] || fail "the scenarios left shared memory behind"

# ---- 3b. NCCL under mpirun ---------------------------------------------------------
# Ranks started by mpirun, one process each (ddp/launch_mpi.c): rank 0's NCCL
# id reaches the others by MPI_Bcast, each binds --gpus[local rank]; the same
# sums as the CPU, and a killed rank named by its watcher, the job ended.
if ldd "$B/ddpbench" | grep -q libmpi; then
    MPIRUN="mpirun --allow-run-as-root --oversubscribe -q -x EMU_NGPU -x EMU_JITTER_US -x DDPBENCH_FAULT -x EMU_NCCL_SHM_TAG"
    M="--layers 12,48,48,4 --act tanh --loss ce --dataset classes --samples 384 --batch 48 --steps 12"
    export EMU_NGPU=3 EMU_JITTER_US=100 DDPBENCH_FAULT=
    for np in 2 3; do
        log="$B/mpi.json"
        $MPIRUN -np $np "$B/ddpbench" --backend cuda --mode ddp --comm nccl $M --json >"$log" 2>"$log.err" ||
            { tail -n 20 "$log.err"; fail "mpirun -np $np ddp --comm nccl"; }
        r=$(rel "$(sums "$B/ref-1.json") $(sums "$log")")
        echo "== mpirun -np $np ddp --comm nccl on emulated GPUs: $r from the CPU"
        awk -v r="$r" 'BEGIN { exit !(r <= 1e-5) }' || fail "mpirun -np $np ddp --comm nccl differs from the CPU by $r"
    done
    t0=$(date +%s)
    rc=0
    DDPBENCH_FAULT=kill:1:4 timeout 60 $MPIRUN -np 2 "$B/ddpbench" --backend cuda --mode ddp --comm nccl \
        --timeout 2 $M --quiet >"$B/fault.log" 2>&1 || rc=$?
    secs=$(($(date +%s) - t0))
    [ "$rc" -eq 1 ] || { cat "$B/fault.log"; fail "a killed rank under mpirun and NCCL: exit $rc, not 1"; }
    grep -q "rank 1 (device 1, host .*) killed by signal 9" "$B/fault.log" ||
        { cat "$B/fault.log"; fail "a killed rank under mpirun and NCCL: not named"; }
    [ "$secs" -le 20 ] || fail "a killed rank under mpirun and NCCL took ${secs}s"
    echo "== kill:1:4 under mpirun and NCCL: exit 1 in ${secs}s: $(grep -m1 'killed' "$B/fault.log")"
    unset EMU_NGPU EMU_JITTER_US DDPBENCH_FAULT
    [ "$(emu_segments)" = "$shm_before" ] || fail "NCCL runs under mpirun left shared memory behind"
else
    echo "== NCCL under mpirun: skipped, $B/ddpbench was built without MPI (NO_MPI=1)"
fi

# ---- 4. checkpoints ---------------------------------------------------------------
# The optimizer state goes through the device download and upload, DP writes
# from device 0's thread, every DDP rank reads the file; the resumed run must
# end with the straight run's bits, with --trace and --explain on the way.
R="--layers 12,48,48,4 --act tanh --loss ce --dataset classes --samples 384 --batch 48 --steps 12 --json --optim adam --lr 0.01"
# single, dp on peer copies (--gpus 0,0) and ddp over NCCL replay their
# steps as CUDA graphs: the resumed run captures anew, Adam's step count
# carried over (dp's graph steps with --trace and --explain's told step).
for mode in "single --gpus 0" "dp --gpus 0,1" "dp --gpus 0,0" "ddp --comm shm --gpus 0,1" "ddp --comm nccl --gpus 0,1"; do
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode $mode $R >"$B/straight.json" 2>&1 || fail "--mode $mode straight"
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode $mode $R --steps 5 --checkpoint "$B/ck.safetensors" --checkpoint-every 2 \
        >"$B/part.json" 2>&1 || fail "--mode $mode, the first 5 steps"
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode $mode $R --resume "$B/ck.safetensors" \
        --trace "$B/trace.json" --explain >"$B/resumed.json" 2>&1 || fail "--mode $mode resumed"
    if ! same_bits "$B/straight.json" "$B/resumed.json"; then
        fail "--mode $mode resumed to other bits"
    fi
    echo "== $mode on emulated GPUs: stopped at 5, resumed to 12: the same bits"
done
# --mode comm on emulated GPUs: every collective staged through pinned memory,
# in and out of place, each result checked; and the provenance the probe gives.
for cg in "shm 0,1" "shm 0,0" "nccl 0,1"; do
    set -- $cg
    EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode comm --comm "$1" --gpus "$2" -b 8 -e 256K -f 8 -n 3 -w 1 \
        >"$B/comm.log" 2>&1 || { tail -n 20 "$B/comm.log"; fail "--mode comm --comm $1 --gpus $2"; }
    grep -q "Out of bounds values : 0 OK" "$B/comm.log" || fail "--mode comm --comm $1 --gpus $2: wrong values"
    echo "== --mode comm --comm $1 --gpus $2 on emulated GPUs: every result right"
done
EMU_NGPU=2 "$B/ddpbench" --backend cuda --mode single --gpus 0 $ARGS --json >"$B/prov.json" 2>/dev/null &&
    grep -q '"pci_bus_id":"00000000:11:00.0"' "$B/prov.json" &&
    grep -q '"gpu_peers":\[\[null,0\],\[0,null\]\]' "$B/prov.json" ||
    fail "the GPU probe's provenance is not in --json: $(head -c 600 "$B/prov.json")"
echo "== the GPU probe's names, PCI ids and peer links reach --json"

# ---- 5. planted missing waits and joins ------------------------------------------
P="$B/planted"
mkdir -p "$P"
# plant_out WHAT LINE SRC: $P/<SRC's name>, SRC without LINE (a WHAT it must
# hold exactly once: else the test no longer plants what it says).
plant_out() {
    [ "$(grep -cF "$2" "$3")" = 1 ] ||
        fail "tests/cuda_emu/run.sh: the $1 to plant out is not in $3; update the test"
    grep -vF "$2" "$3" >"$P/$(basename "$3")"
}
FLAGS=$(cut -d'|' -f1 "$B/flags.txt" | sed 's/-MMD -MP//')
LIBS=$(cut -d'|' -f3 "$B/flags.txt")
# the program's own objects (the Makefile's MAIN_OBJS, read from it so a new one is not missed)
MAIN_OBJS=$(make -s -f Makefile EMU=1 print-main-objs) || fail "make print-main-objs"
# plant_build PROG SRC: $P/PROG, the program with $P/SRC.c (a planted copy of
# one of its sources) linked ahead of the library's own object.
plant_build() {
    # shellcheck disable=SC2086 # flag lists
    { $FLAGS -c "$P/$2.c" -o "$P/$2.o" &&
        $FLAGS -o "$P/$1" $MAIN_OBJS "$P/$2.o" "$B/libddpbench.a" $LIBS; }
}
# stage.c without the compute stream's wait for the staged batch's copy: with
# slow copies, the forward pass reads the slot before the batch lands.
wait_line='TRY(backend_stream_wait(be, h->copied));'
plant_out wait "$wait_line" common/train/stage.c
plant_build ddpbench stage ||
    fail "building the planted variant"
# A race, so up to 3 tries: on a busy machine the compute stream's thread may
# itself wait past the slow copy once (seen at load 13: 2.1e-09 from the CPU,
# then caught 3 times of 3); a wait the emulator cannot catch stays equal in all.
ref="$B/ref-1.json"
try=0 caught=
while [ $try -lt 3 ] && [ -z "$caught" ]; do
    try=$((try + 1))
    EMU_NGPU=1 EMU_COPY_DELAY_US=2000 "$P/ddpbench" --backend cuda --mode single --gpus 0 $ARGS \
        >"$P/out.json" 2>"$P/out.err" || true
    got=$(sums "$P/out.json")
    r=$([ -n "$got" ] && rel "$(sums "$ref") $got" || echo "no result")
    case "$r" in
    "no result") caught="the run failed" ;;
    *) awk -v r="$r" 'BEGIN { exit !(r > 1e-5) }' && caught="single ends $r from the CPU" ;;
    esac
done
[ -n "$caught" ] || fail "a planted missing wait went unnoticed in 3 tries ($r from the CPU)"
echo "== planted missing wait: $caught (caught, try $try)"

# ddp's graph step without the comm stream's join back into the capture
# (comm_nccl.c): CUDA does not end a capture a stream joined and never left,
# so --cuda-graph on must fail (cudaErrorStreamCaptureUnjoined), never replay
# a step whose optimizer does not wait for its all-reduces.
join_line='CCK(c, cudaStreamWaitEvent(n->be_stream, n->gjoin, 0));'
plant_out join "$join_line" common/comm/comm_nccl.c
plant_build ddpbench-join comm_nccl ||
    fail "building the planted variant without the join"
rc=0
EMU_NGPU=2 timeout 60 "$P/ddpbench-join" --backend cuda --mode ddp --comm nccl --gpus 0,1 $ARGS --cuda-graph on \
    >"$P/join.json" 2>"$P/join.err" || rc=$?
[ "$rc" = 1 ] && grep -q cudaErrorStreamCaptureUnjoined "$P/join.err" ||
    { tail -n 5 "$P/join.err"; fail "a planted missing join of the comm stream went unnoticed (exit $rc)"; }
echo "== planted missing join of the comm stream: ddp's capture refused, exit 1 (caught)"
# dp's graph step without device 0's waits for the other devices' joins
# (common/train/graph.c's group): their streams joined device 0's capture
# and were never joined back, so CUDA does not end it.
join_line='TRY(dev(g, backend_stream_wait(g->be, gr->member[e]->join), err));'
plant_out join "$join_line" common/train/graph.c
plant_build ddpbench-dpjoin graph ||
    fail "building the planted variant without dp's joins"
rc=0
EMU_NGPU=1 timeout 60 "$P/ddpbench-dpjoin" --backend cuda --mode dp --gpus 0,0 $ARGS --cuda-graph on \
    >"$P/dpjoin.json" 2>"$P/dpjoin.err" || rc=$?
[ "$rc" = 1 ] && grep -q cudaErrorStreamCaptureUnjoined "$P/dpjoin.err" ||
    { tail -n 5 "$P/dpjoin.err"; fail "a planted missing join of dp's devices went unnoticed (exit $rc)"; }
echo "== planted missing join of dp's devices: dp's capture refused, exit 1 (caught)"
# A member that ends the capture it only joined (backend.c: a follower
# dropping its step right after its join, the answer ignored as
# cuda_graph_drop ignores it): CUDA answers cudaErrorStreamCaptureUnmatched
# and invalidates the capture, so the member's next work and device 0's end
# fail; the dp run must fail, never train on.
follow_line='    return backend_stream_wait(be, fork);'
[ "$(grep -cxF "$follow_line" common/device/backend.c)" = 1 ] ||
    fail "tests/cuda_emu/run.sh: the follow to plant into is not in common/device/backend.c; update the test"
sed "s|^$follow_line\$|    TRY(backend_stream_wait(be, fork)); if (be->gmode == GRAPH_CAPTURE) be->ops->graph_drop(be, key); return DDP_OK;|" \
    common/device/backend.c >"$P/backend.c"
plant_build ddpbench-dpend backend ||
    fail "building the planted variant whose members end the capture"
rc=0
EMU_NGPU=1 timeout 60 "$P/ddpbench-dpend" --backend cuda --mode dp --gpus 0,0 $ARGS --cuda-graph on \
    >"$P/dpend.json" 2>"$P/dpend.err" || rc=$?
[ "$rc" = 1 ] && [ "$(grep -c '^ddpbench: error: ' "$P/dpend.err")" = 1 ] &&
    grep -q cudaErrorStreamCaptureInvalidated "$P/dpend.err" ||
    { tail -n 5 "$P/dpend.err"; fail "a planted member that ends device 0's capture went unnoticed (exit $rc)"; }
echo "== planted member ending device 0's capture: the capture invalidated, exit 1 (caught)"

# ---- 6. the kernels under ASan + UBSan ---------------------------------------------
build_asan
echo "== test_cuda's kernel and backend tests under ASan + UBSan"
log="$BA/test_cuda.log"
# The kernels' coroutines tell ASan of each stack switch (emu_kernel.hpp), so
# a bad access in a GPU thread's frame is caught there too.
ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=0:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 EMU_NGPU=2 \
    "$BA/tests/unit/test_cuda" --jobs 2 --filter 'cuda_[bkp]*/*' >"$log" 2>&1 ||
    { tail -n 30 "$log"; fail "test_cuda under ASan (log: $log)"; }
tail -n 1 "$log"
echo "cuda-emu: passed"
