#!/bin/sh
# tests/e2e/e2e_hooks.sh: DDP's communication hooks (--comm-hook) on the real
# binary, small and quick (SGD without momentum, 16 steps, 2 and 3 ranks):
#  - bad input: a hook outside --mode ddp, with --zero1, a malformed value;
#  - bytes per step in --json: fp16/bf16 half of plain DDP's, PowerSGD's
#    P + Q + vectors exactly (rank 1 and 2, a matrix too small to compress
#    at rank 2 sent whole), plain before START (drift exactly 0);
#  - drift from the plain reference within the bound docs/modes.md derives:
#    16-bit hooks: d <= 2 (w+1) u R, u = 2^-11 (fp16) or 2^-8 (bf16), w ranks,
#    R = |theta_S - theta_0| / |theta_S| (the plain run's travel, measured
#    here with lr 0 for theta_0), and above 0 (the hook did something);
#    PowerSGD with error feedback: d <= 4 R / S (the residual it leaves is a
#    step or two's update; without error feedback rank 1 drifts ~4x more);
#  - the 16-bit sums agree between transports: shm and MPI (Open MPI's
#    user-defined reduction; 3 ranks, so the order of additions differs)
#    within the 16-bit bound, and MPI's fp16 run drifts from MPI's plain
#    run within it too;
#  - --report's page has the hook's section (bytes, drift, both loss curves).
# Usage: sh tests/e2e/e2e_hooks.sh ./ddpbench
E2E=e2e_hooks
. "$(dirname "$0")/lib.sh"
need python3 || { e2e_finish; exit; }

expect_error "--comm-hook fp16: only ddp" --mode dp --comm-hook fp16
expect_error "--comm-hook bf16: only ddp" --mode compare --comm-hook bf16
expect_error "--comm-hook fp16: not with --zero" --mode ddp --zero1 --comm-hook fp16
expect_error "--comm-hook: 'int8'" --mode ddp --comm-hook int8
expect_error "not with --comm-hook" --mode ddp --comm-hook fp16 --emit-pytorch "$T/twin.py"
expect_error "--comm-hook: 0 is too small" --mode ddp --comm-hook powersgd:0
expect_error "--comm-hook: 1 is too small" --mode ddp --comm-hook powersgd:2:1

RUN="--mode ddp --backend cpu --layers 16,64,32,4 --act tanh --loss mse --optim sgd --lr 0.1 \
    --momentum 0 --samples 512 --batch 64 --steps 16 --log-every 4"
S=16

# hook NP [ARGS]: --json of the hooked run -> "bytes plain drift final_loss curve_rows"
hook() {
    h=$1 np=$2
    shift 2
    "$BIN" $RUN --gpus "$(seq -s, 0 $((np - 1)))" --comm-hook "$h" --json "$@" >"$T/j" 2>"$T/err" ||
        { ko "--comm-hook $h on $np: $(cat "$T/err")"; echo "0 0 nan 0 0"; return; }
    python3 -c '
import json, sys
o = json.loads(open(sys.argv[1]).readline())
h = o["comm_hook"]
d = h["drift"]
print(h["bytes_per_step"], h["bytes_per_step_plain"], d["params_rel_l2"], o["final_loss"],
      len(d["loss_curve"]))' "$T/j"
}

le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# R: how far the plain run travels (theta_0 from the same run with lr 0)
"$BIN" $RUN --gpus 0,1 --quiet --lr 0 --save "$T/p0.st" >/dev/null 2>"$T/err" || ko "lr 0: $(cat "$T/err")"
"$BIN" $RUN --gpus 0,1 --quiet --save "$T/pS.st" >/dev/null 2>"$T/err" || ko "plain: $(cat "$T/err")"
R=$(st_dist "$T/p0.st" "$T/pS.st")
echo "e2e_hooks: the plain run travels R = $R"

# plain DDP sends every parameter: 16*64+64 + 64*32+32 + 32*4+4 = 3300 floats
PLAIN=13200
for np in 2 3; do
    for h in fp16 bf16; do
        u=$([ $h = fp16 ] && echo 0.00048828125 || echo 0.00390625)
        set -- $(hook $h $np --save "$T/$h$np.st")
        bound=$(awk -v w=$np -v u=$u -v r="$R" 'BEGIN { printf "%.3g", 2 * (w + 1) * u * r }')
        [ "$1" = 6600 ] && [ "$2" = $PLAIN ] && ok || ko "$h on $np: bytes $1 of $2, expected 6600 of $PLAIN"
        le "$3" "$bound" && gt "$3" 0 && ok || ko "$h on $np: drift $3 not in (0, $bound]"
        [ "$5" = 4 ] && ok || ko "$h on $np: $5 loss points, expected 4"
        echo "e2e_hooks: $h on $np ranks: drift $3 (bound $bound)"
        [ $h$np = fp162 ] && drift=$3
    done
done
# a hooked run stopped and resumed ends as the one that never stopped, drift and all (its
# plain reference trains the whole job); resumed under another hook, it is refused
"$BIN" $RUN --gpus 0,1 --comm-hook fp16 --steps 8 --checkpoint "$T/h.st" --quiet >/dev/null 2>"$T/err" ||
    ko "fp16 --checkpoint: $(cat "$T/err")"
set -- $(hook fp16 2 --resume "$T/h.st" --save "$T/fp16r.st")
cmp -s "$T/fp162.st" "$T/fp16r.st" && [ "$3" = "$drift" ] && ok ||
    ko "fp16 resumed: drift $3 against $drift, weights $(st_dist "$T/fp162.st" "$T/fp16r.st") apart"
expect_error "the checkpoint was written with --comm-hook fp16, this run has --comm-hook bf16" \
    $RUN --gpus 0,1 --comm-hook bf16 --resume "$T/h.st"

# PowerSGD: rank 1 sends P + Q of each matrix and the 100 bias floats:
# (64+16) + (32+64) + (4+32) + 100 = 312 floats; rank 2 leaves the 4x32
# matrix whole ((4+32)*2*2 >= 128): 160 + 192 + 128 + 100 = 580
pbound=$(awk -v r="$R" -v s=$S 'BEGIN { printf "%.3g", 4 * r / s }')
set -- $(hook powersgd:1:4 2)
[ "$1" = 1248 ] && ok || ko "powersgd:1: bytes $1, expected 1248"
le "$3" "$pbound" && gt "$3" 0 && ok || ko "powersgd:1: drift $3 not in (0, $pbound]"
d1=$3
set -- $(hook powersgd:2:4 2)
[ "$1" = 2320 ] && ok || ko "powersgd:2: bytes $1, expected 2320"
le "$3" "$d1" && ok || ko "powersgd:2 drifts $3, more than rank 1's $d1"
echo "e2e_hooks: powersgd rank 1: drift $d1, rank 2: $3 (bound $pbound)"
set -- $(hook powersgd:1:100 2)
[ "$1" = $PLAIN ] && [ "$3" = 0 ] && ok || ko "powersgd before its start: bytes $1, drift $3 (plain: $PLAIN, 0)"

# --report: the page shows the hook's bytes, drift and both loss curves
"$BIN" $RUN --gpus 0,1 --comm-hook fp16 --quiet --report "$T/page.html" >/dev/null 2>"$T/err" ||
    ko "--report with a hook: $(cat "$T/err")"
grep -q '<section id="hook">' "$T/page.html" && [ "$(grep -c '<polyline' "$T/page.html")" -ge 2 ] &&
    grep -q '2.00x less' "$T/page.html" && ok || ko "--report: no hook section with its two curves"

# the 16-bit sums over MPI: Open MPI's user-defined reduction
if need mpirun && "$BIN" --help | grep -q -- "--launcher"; then
    MPIRUN="mpirun --allow-run-as-root --oversubscribe -q --mca btl vader,self"
    BINA=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
    for h in fp16 bf16; do
        u=$([ $h = fp16 ] && echo 0.00048828125 || echo 0.00390625)
        bound=$(awk -v u=$u -v r="$R" 'BEGIN { printf "%.3g", 2 * 4 * u * r }')
        if $MPIRUN -np 3 "$BINA" $RUN --comm mpi --comm-hook $h --json --save "$T/mpi$h.st" \
            >"$T/j" 2>"$T/err"; then
            dm=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["comm_hook"]["drift"]["params_rel_l2"])' "$T/j")
            le "$dm" "$bound" && gt "$dm" 0 && ok || ko "$h over mpi: drift $dm not in (0, $bound]"
            ds=$(st_dist "$T/mpi$h.st" "$T/${h}3.st")
            le "$ds" "$bound" && ok || ko "$h: mpi and shm differ by $ds (bound $bound)"
            echo "e2e_hooks: $h over mpi (3 ranks): drift $dm, from shm's $ds (bound $bound)"
        else
            ko "$h under mpirun: $(cat "$T/err")"
        fi
    done
fi
e2e_finish
