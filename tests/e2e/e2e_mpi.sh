#!/bin/sh
# tests/e2e/e2e_mpi.sh: DDP's ranks started by mpirun (the mpi launcher and
# --comm mpi) on the real binary, on this one host:
#  - the final parameters of -np 2 and -np 3 equal fork-mode DDP's and single
#    mode's to 1e-5 (relative L2), over Open MPI's shared memory and over its
#    TCP transport (--mca btl tcp,self, the transport between hosts);
#  - rank 0 alone prints: one --json object, one trace with a process per rank;
#  - --mode compare under mpirun (single on rank 0 against DDP);
#  - faults: a rank killed (exit 1 within --timeout + 2 s, named, nothing
#    left), a rank that stalls (the one that did not arrive is named), the
#    process mpirun started killed (mpirun's own status and line);
#  - a rank started with other options, data or binary: exit 2 at start-up,
#    one line naming the rank and what differs; bad input under mpirun;
#    --launcher mpi, or mpirun's variables, without mpirun.
# Usage: sh tests/e2e/e2e_mpi.sh ./ddpbench
E2E=e2e_mpi
. "$(dirname "$0")/lib.sh"
e2e_on_exit() { for p in $(leftovers); do kill -KILL "$p" 2>/dev/null; done; }

need mpirun || { e2e_finish; exit; }
need python3 || { e2e_finish; exit; }
# -q: mpirun's own notes ("Primary job terminated normally ...") stay out of
# stderr, so what ddpbench says is the whole of it
MPIRUN="mpirun --allow-run-as-root --oversubscribe -q -x DDPBENCH_E2E_TAG -x DDPBENCH_FAULT"
export DDPBENCH_E2E_TAG=$TAG
export DDPBENCH_FAULT=
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
if ! $MPIRUN -np 1 "$BIN" --version >/dev/null 2>&1 ||
    "$BIN" --launcher mpi --mode ddp --backend cpu --steps 1 --quiet 2>&1 | grep -q "not built"; then
    ko "$BIN has no mpi launcher (built with NO_MPI=1?)"
    e2e_finish
    exit
fi

# Not under mpirun, MPI would make a world of one and train on one device
# whatever --gpus says: --launcher mpi, or variables left from another
# mpirun, are refused.
expect_error "--launcher mpi: mpirun did not start this process" --launcher mpi --mode ddp \
    --gpus 0,1 --backend cpu --steps 1
env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$BIN" --mode ddp --gpus 0,1 --backend cpu \
    --steps 1 >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
    grep -q "^ddpbench: error: OMPI_COMM_WORLD_SIZE says 2 ranks, but MPI started 1" "$T/err" &&
    ok || ko "mpirun's variables left without mpirun: exit $rc: $(cat "$T/err")"
# a size that is no positive integer, a rank without a size, or a world of 1
# beside a list of devices: each refused in one line naming the variable
left_var() {
    env "$1" "$BIN" --mode ddp --gpus 0,1 --backend cpu --steps 1 >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && [ ! -s "$T/out" ] &&
        grep -q "^ddpbench: error: " "$T/err" && grep -qF -- "$2" "$T/err" && ok ||
        ko "$1 without mpirun: exit $rc: $(cat "$T/err")"
}
for e in OMPI_COMM_WORLD_SIZE=abc OMPI_COMM_WORLD_SIZE=0 PMI_SIZE=2x; do
    left_var "$e" "$e: the world size mpirun sets is a positive integer"
done
left_var PMIX_RANK=0 "PMIX_RANK is set but no world size"
left_var OMPI_COMM_WORLD_SIZE=1 "OMPI_COMM_WORLD_SIZE=1 says a world of 1 rank, but --gpus names 2"
left_var PMI_SIZE=1 "PMI_SIZE=1 says a world of 1 rank, but --gpus names 2"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
slower() { awk -v x="$1" -v lim="$2" 'BEGIN { exit !(x > lim) }'; }

# ---------------------------------------------------------------------------
# the same parameters: single == fork DDP == DDP under mpirun, 2 and 3 ranks.
# --no-shuffle off, a batch that does not split evenly over 3 (ranks weigh
# their rows), Adam with weight decay, a few steps
RUN="--mode ddp --backend cpu --layers 16,32,24,5 --act gelu --loss ce --optim adamw --lr 0.01 \
    --samples 500 --batch 100 --steps 8 --quiet"
for np in 2 3; do
    gpus=$(seq -s, 0 $((np - 1)))
    "$BIN" $RUN --mode single --sampler-replicas $np --save "$T/single$np.st" >/dev/null 2>"$T/err" ||
        ko "single ($np replicas): $(cat "$T/err")"
    "$BIN" $RUN --gpus "$gpus" --save "$T/fork$np.st" >/dev/null 2>"$T/err" ||
        ko "fork ddp on $gpus: $(cat "$T/err")"
    for how in shm tcp; do
        mca=
        [ $how = tcp ] && mca="--mca btl tcp,self"
        [ $how = shm ] && mca="--mca btl vader,self"
        out="$T/mpi$np$how.st"
        if ! $MPIRUN $mca -np $np "$BIN" $RUN --comm mpi --save "$out" >"$T/out" 2>"$T/err"; then
            ko "mpirun -np $np ($how): $(cat "$T/err")"
            continue
        fi
        # rank 0 alone prints the result
        [ "$(grep -c '^result: ' "$T/out")" = 1 ] && ok || ko "mpirun -np $np ($how): $(cat "$T/out")"
        d1=$(st_close "$out" "$T/fork$np.st") && ok || ko "mpirun -np $np ($how) vs fork ddp: distance $d1"
        d2=$(st_close "$out" "$T/single$np.st") && ok || ko "mpirun -np $np ($how) vs single: distance $d2"
        echo "e2e_mpi: -np $np over $how: vs fork ddp $d1, vs single $d2"
    done
done

# ZeRO-2 and -3 over MPI's collectives (reduce-scatter, all-gather): plain
# DDP's parameters, 3 ranks
for z in 2 3; do
    out="$T/mpi-zero$z.st"
    if $MPIRUN --mca btl vader,self -np 3 "$BIN" $RUN --comm mpi --zero $z --save "$out" \
        >"$T/out" 2>"$T/err"; then
        d=$(st_close "$out" "$T/fork3.st") && ok || ko "mpirun -np 3 --zero $z vs fork ddp: distance $d"
        echo "e2e_mpi: -np 3 --zero $z: vs fork ddp $d"
    else
        ko "mpirun -np 3 --zero $z: $(cat "$T/err")"
    fi
done

# ---------------------------------------------------------------------------
# rank 0 reports for all: the banner says who launched, --json is one object
# on stdout, the trace has one process per rank, each device named by its host
SMALL="--backend cpu --model mlp-small --samples 1024 --steps 6"
if $MPIRUN -np 3 "$BIN" --mode ddp $SMALL --json --trace "$T/trace.json" >"$T/json" 2>"$T/err"; then
    grep -q "launched by mpirun: 3 ranks on 1 host (.*: ranks 0-2), comm mpi" "$T/err" && ok ||
        ko "the banner does not say mpirun: $(head -8 "$T/err")"
    [ "$(wc -l <"$T/json")" = 1 ] && ok || ko "--json under mpirun: $(wc -l <"$T/json") lines"
    python3 - "$T/json" "$T/trace.json" "$(hostname)" <<'EOF' && ok || ko "--json / --trace under mpirun"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["config"]["mode"] == "ddp", o["config"]
assert [d["id"] for d in o["devices"]] == [0, 1, 2], o["devices"]
assert all(("host " + sys.argv[3]) in d["name"] for d in o["devices"]), o["devices"]
assert all(d["steps_run"] == 6 for d in o["devices"])
t = json.load(open(sys.argv[2]))
ev = t["traceEvents"] if isinstance(t, dict) else t
pids = {e["pid"] for e in ev if e.get("ph") == "X"}
assert len(pids) == 3, "one process per rank: %s" % sorted(pids)
EOF
else
    ko "mpirun --json --trace: $(cat "$T/err")"
fi

# --mode compare: DDP on every rank, single on rank 0 after it; one report
# and one page (--report: rank 0 draws single's device and both ranks)
if $MPIRUN -np 2 "$BIN" --mode compare $SMALL --report "$T/page.html" >"$T/out" 2>"$T/err"; then
    [ "$(grep -c '<g class="lane"' "$T/page.html")" = 5 ] && ok ||
        ko "--report under mpirun: $(grep -c '<g class="lane"' "$T/page.html") lanes, want 5"
    grep -q "params vs single .*agree" "$T/out" && ok || ko "compare under mpirun: $(cat "$T/out")"
    [ "$(grep -c '^compare: ' "$T/out")" = 1 ] && ok || ko "compare under mpirun: not one report"
    grep -q "^== dp" "$T/out" && ko "compare under mpirun ran dp (a one-process mode)"
else
    ko "compare under mpirun: $(cat "$T/err")"
fi

# ---------------------------------------------------------------------------
# faults: exit 1, a line naming the rank, within 8 s of the training's start,
# no process left.  The clock starts at rank 0's banner (its last line,
# "launched by mpirun ..."), printed once every rank is through MPI_Init:
# mpirun's own start and MPI_Init say nothing of how fast a fault ends the
# job, and on a busy machine they took most of it (the limits of 4-5 s from
# mpirun's start failed at load 17 with 8 s; the runs on a CPU quota of 15% of
# one core take 3.7-5.4 s from the banner, 1.6-3.1 s unloaded).  A killed or
# exiting rank must be named by its watcher, not found by a peer's timeout:
# those runs take --timeout 10, so a death found only by the timeout
# overruns; a stalled rank is found by --timeout 2 (the 60 s default, or a
# timeout kept 4 times too long, overruns).
check_clean() {
    left=$(lingering)
    [ -z "$left" ] && ok || ko "$1: processes left behind: $left"
}
# the check itself: a planted orphan (a tagged process that lives on) is
# named, and nothing is when none lives, call after call (its grep, which
# names itself, was once in 7 calls still live when looked at)
sleep 60 &
orphan=$!
leftovers | grep -qx "$orphan" && ok || ko "leftovers missed a planted orphan ($orphan)"
kill "$orphan"
wait "$orphan" 2>/dev/null
i=0
while [ $i -lt 20 ] && [ -z "$(leftovers)" ]; do i=$((i + 1)); done
[ $i = 20 ] && ok || ko "leftovers named a process when none lives: $(leftovers)"
# each line of stdin with the time it arrived (seconds, to the millisecond)
stamp() { perl -MTime::HiRes=time -ne '$| = 1; printf "%.3f %s", time, $_'; }
LONG="--mode ddp --backend cpu --model mlp-small --samples 2400 --batch 240 --steps 100000"
fault() { # NAME FAULT WANT LIMIT_S [options]
    name=$1 f=$2 want=$3 limit=$4
    shift 4
    { DDPBENCH_FAULT=$f $MPIRUN -np 3 "$BIN" $LONG "$@" 2>&1; echo "rc $?"; } | stamp >"$T/stamped"
    t1=$(now)
    rc=$(sed -n 's/^[0-9.]* rc //p' "$T/stamped")
    sed -e 's/^[0-9.]* //' -e '/^rc [0-9]*$/d' "$T/stamped" >"$T/err"
    t0=$(sed -n 's/^\([0-9.]*\)   launched by mpirun: .*/\1/p' "$T/stamped")
    [ -n "$t0" ] && ok || ko "$name: no banner from rank 0 ($(cat "$T/err"))"
    secs=$(awk -v a="${t0:-0}" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    [ "$rc" = 1 ] && ok || ko "$name: exit $rc, expected 1 ($(cat "$T/err"))"
    grep "^ddpbench: error: " "$T/err" | grep -qF "$want" && ok || ko "$name: '$want' not in: $(cat "$T/err")"
    slower "$secs" "$limit" && ko "$name: took $secs s from the banner (limit $limit s)"
    check_clean "$name"
    echo "e2e_mpi: $name: exit $rc in $secs s from the banner: $(grep '^ddpbench: error: ' "$T/err" | head -1)"
}
fault "rank killed" kill:1:5 "rank 1 (device 1, host $(hostname)) killed by signal 9 (Killed)" 8 --timeout 10
fault "rank exits" exit:2:5 "rank 2 (device 2, host $(hostname)) exited with status 7" 8 --timeout 10
fault "rank stalls" stall:1:5 "timed out in all-reduce of bucket 0: rank 1 did not arrive within 2 s" 8 \
    --timeout 2

# the rank's process killed from outside (what a dying host does to it)
# (--json: rank 0's banner on stderr, its last line once every rank has
# bound its device; the kill waits for it, else a busy machine's slow start
# had rank 1 killed before it had a device to be named by)
$MPIRUN -np 2 "$BIN" $LONG --json --timeout 2 >"$T/out" 2>"$T/err" &
MP=$!
rank1() { # the process of rank 1 (under the one mpirun started, its watcher)
    for p in $(pgrep -P "$MP"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then
            pgrep -P "$p"
        fi
    done
}
i=0
while { [ -z "$(rank1)" ] || ! grep -q "launched by mpirun" "$T/err"; } && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 0.5 # into the training loop
R=$(rank1)
t0=$(now)
[ -n "$R" ] && kill -KILL $R || ko "rank 1's process never started"
wait $MP
rc=$?
secs=$(elapsed "$t0")
[ $rc = 1 ] && ok || ko "rank 1 killed from outside: exit $rc ($(cat "$T/err"))"
grep -q "^ddpbench: error: rank 1 (device 1, host .*) killed by signal 9" "$T/err" && ok ||
    ko "rank 1 killed from outside: $(cat "$T/err")"
slower "$secs" 4 && ko "rank 1 killed from outside: the job took $secs s to end"
check_clean "rank 1 killed from outside"
echo "e2e_mpi: rank 1 killed from outside: exit $rc in $secs s"

# ---------------------------------------------------------------------------
# the start-up check: a rank started otherwise is named, exit 2, before any step
mismatch() { # WANT then mpirun's program lines (MPMD)
    want=$1
    shift
    $MPIRUN "$@" >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc = 2 ] && ok || ko "mismatch '$want': exit $rc ($(cat "$T/err"))"
    [ "$(wc -l <"$T/err")" = 1 ] && grep -q "^ddpbench: error: " "$T/err" && grep -qF -- "$want" "$T/err" &&
        ok || ko "mismatch: '$want' not the one line of: $(cat "$T/err")"
    grep -q "^step " "$T/out" && ko "mismatch '$want': a step ran"
}
S="--mode ddp --backend cpu --layers 4,8,2 --loss ce --samples 64 --batch 16 --steps 2"
mismatch "rank 1 (host $(hostname)) was started with another optimizer or hyper-parameters (--optim, --lr, --momentum, --weight-decay, ...) than rank 0 (host $(hostname)): --lr 0.1 there, --lr 0.01 on rank 0" \
    -np 1 "$BIN" $S --lr 0.01 : -np 1 "$BIN" $S --lr 0.1
D="--mode ddp --backend cpu --layers 4,8,2 --loss ce --batch 2 --steps 2"
printf '1,2,3,4,0\n5,6,7,8,1\n' >"$T/a.csv"
printf '1,2,3,4,0\n5,6,7,9,1\n' >"$T/b.csv"
# (linger: rank 0 is slow to exit after MPI_Finalize, as on a busy machine,
# so mpirun, ending the job for ranks 1 and 2's status 2, signals it while it
# leaves: still one line, no "stopped: ... mpirun ended the job" after it)
export DDPBENCH_FAULT=linger:0:0
mismatch "rank 2 (host $(hostname)) was started with other data (--data, --targets, --samples, --dataset, --noise, or the files' contents) than rank 0 (host $(hostname)): 2 rows of 4 features and 1 targets, hash" \
    -np 2 "$BIN" $D --data "$T/a.csv" : -np 1 "$BIN" $D --data "$T/b.csv"
export DDPBENCH_FAULT=
# an input that fails on one rank alone (a file missing on its host) is named with it
mismatch "rank 1 (host $(hostname)): $T/none.csv: cannot open: No such file or directory" \
    -np 1 "$BIN" $D --data "$T/a.csv" : -np 1 "$BIN" $D --data "$T/none.csv"
cp "$BIN" "$T/ddpbench-other" && printf 'x' >>"$T/ddpbench-other"
mismatch "rank 1 (host $(hostname)) was started with another ddpbench build (every rank must run the same one) than rank 0" \
    -np 1 "$BIN" $S : -np 1 "$T/ddpbench-other" $S

# bad input under mpirun: rank 0 says it once, exit 2
bad() { # WANT options...
    want=$1
    shift
    $MPIRUN -np 2 "$BIN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "^ddpbench: error: $want" "$T/err" &&
        ok || ko "$* under mpirun: exit $rc: $(cat "$T/err")"
}
bad "--comm shm: ranks started by mpirun share no memory segment" --mode ddp --backend cpu --comm shm
bad "--mode dp: runs in one process" --mode dp --backend cpu
bad "--scenario straggler: forks its own ranks on one host" --scenario straggler

e2e_finish
