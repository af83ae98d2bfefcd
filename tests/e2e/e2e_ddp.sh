#!/bin/sh
# tests/e2e/e2e_ddp.sh: DDP's fault model end to end, on the real binary:
# a rank SIGKILLed mid-training, a rank that exits early, a rank that stalls
# past --timeout, Ctrl-C to the supervisor, and the supervisor itself killed.
# Each must end promptly with the right exit status and message, leaving no
# process and no /dev/shm entry behind.  Plus one clean run that must match
# single mode.  Usage: sh tests/e2e/e2e_ddp.sh ./ddpbench
E2E=e2e_ddp
. "$(dirname "$0")/lib.sh"
# On the way out, whatever a failed check left running goes too (by pid).
e2e_on_exit() { for p in $(leftovers); do kill -KILL "$p" 2>/dev/null; done; }
COMMON="--backend cpu --model mlp-small --samples 2400 --quiet"
fail() { ko "$*"; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
slower() { awk -v x="$1" -v lim="$2" 'BEGIN { exit !(x > lim) }'; }

# Nothing of ours may survive: wait up to 10 s for the dying, then judge.
check_clean() {
    what=$1
    left=$(lingering)
    [ -z "$left" ] || fail "$what: processes left behind: $left"
    shm_list >"$T/shm_after"
    # only new entries are ours to answer for: /dev/shm is shared, and another
    # program's entry may come or go meanwhile
    new=$(shm_new "$T/shm_before" "$T/shm_after" | tr '\n' ' ')
    [ -z "$new" ] || fail "$what: new /dev/shm entries: $new"
    ok
}

# run_fault NAME FAULT EXPECTED_MESSAGE MAX_SECONDS [extra options]
run_fault() {
    name=$1 fault=$2 want=$3 limit=$4
    shift 4
    shm_list >"$T/shm_before"
    t0=$(now)
    DDPBENCH_E2E_TAG=$TAG DDPBENCH_FAULT=$fault $BIN $COMMON --mode ddp --gpus 0,1,2 \
        --batch 240 --steps 200 "$@" >"$T/out" 2>"$T/err"
    rc=$?
    secs=$(elapsed "$t0")
    [ $rc -eq 1 ] || fail "$name: exit status $rc, expected 1 ($(cat "$T/err"))"
    grep '^ddpbench: error: rank ' "$T/err" | grep -qF "$want" ||
        fail "$name: expected '$want', got '$(cat "$T/err")'"
    slower "$secs" "$limit" && fail "$name: took $secs s (limit $limit s)"
    check_clean "$name"
    echo "e2e_ddp: $name: exit $rc in $secs s: $(head -1 "$T/err")"
}

run_fault "rank killed" kill:1:5 "rank 1 (device 1) killed by signal 9 (Killed)" 5
run_fault "rank exits" exit:2:5 "rank 2 (device 2) exited with status 7" 5
run_fault "rank stalls" stall:1:5 \
    "timed out in all-reduce of bucket 0: rank 1 did not arrive within 2 s" 6 --timeout 2
run_fault "rank fails" error:0:5 "rank 0 (device 0): injected fault at step 5" 5

# Start a long run in the background and wait until both ranks exist.
# (env --default-signal: a background job of a script starts with SIGINT
# ignored, and ddpbench keeps an ignored SIGINT ignored)
start_long() {
    DDPBENCH_E2E_TAG=$TAG env --default-signal=INT $BIN $COMMON --mode ddp --gpus 0,1 --batch 240 \
        --steps 1000000 >"$T/out" 2>"$T/err" &
    SUP=$!
    i=0
    while [ "$(pgrep -P $SUP | wc -l)" -lt 2 ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ "$(pgrep -P $SUP | wc -l)" -ge 2 ] || fail "$1: the ranks never started"
    sleep 0.5 # into the training loop
}

# Ctrl-C: SIGINT to the supervisor stops every rank, exit 130, nothing left.
shm_list >"$T/shm_before"
start_long "Ctrl-C"
t0=$(now)
kill -INT $SUP
wait $SUP
rc=$?
secs=$(elapsed "$t0")
[ $rc -eq 130 ] || fail "Ctrl-C: exit status $rc, expected 130"
grep -q "ddpbench: stopped: interrupted by SIGINT after step [0-9]* of [0-9]*: stopped 2 ranks" "$T/err" ||
    fail "Ctrl-C: got '$(cat "$T/err")'"
slower "$secs" 3 && fail "Ctrl-C: took $secs s"
check_clean "Ctrl-C"
echo "e2e_ddp: Ctrl-C: exit $rc in $secs s: $(head -1 "$T/err")"

# The supervisor SIGKILLed: the ranks die with it (PR_SET_PDEATHSIG).
shm_list >"$T/shm_before"
start_long "supervisor killed"
kill -KILL $SUP
wait $SUP 2>/dev/null
check_clean "supervisor killed"
echo "e2e_ddp: supervisor killed: no rank survived"

# A clean run: exit 0 and the same final loss as single mode to 1e-5
# relative (only the summation order differs; SGD, because Adam's
# normalisation amplifies rounding in near-zero gradients).
shm_list >"$T/shm_before"
args="$COMMON --batch 240 --steps 12 --log-every 4 --optim sgd --lr 0.05 --momentum 0.9"
DDPBENCH_E2E_TAG=$TAG $BIN $args --mode single >"$T/single" 2>&1 || fail "single run failed"
DDPBENCH_E2E_TAG=$TAG $BIN $args --mode ddp --gpus 0,1,2 >"$T/ddp" 2>&1 ||
    fail "ddp run failed: $(cat "$T/ddp")"
a=$(grep "final loss" "$T/single" | awk '{ print $3 }')
b=$(grep "final loss" "$T/ddp" | awk '{ print $3 }')
[ -n "$a" ] && [ -n "$b" ] &&
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * (a < 0 ? -a : a)) }' ||
    fail "clean run: final loss single '$a' vs ddp '$b'"
check_clean "clean run"
echo "e2e_ddp: clean run: final loss $(grep 'final loss' "$T/ddp" | awk '{ print $3 }') as in single mode"

# The design's own commands, every default but the backend and the device
# list: 256 rows over 3 devices (86, 85, 85), 8192 samples padded to 8193;
# compare trains all three and they agree.
"$BIN" --backend cpu --gpus 0,1,2 >"$T/out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "parameters: dp vs single agree" "$T/out" &&
    grep -q "parameters: ddp vs single agree" "$T/out" && grep -q "pads 8192 samples to 8193" "$T/out" &&
    ok || fail "ddpbench --gpus 0,1,2: exit $rc: $(tail -20 "$T/out")"
for m in dp ddp; do
    "$BIN" --backend cpu --mode $m --gpus 0,1,2 --quiet >"$T/out" 2>&1 && ok ||
        fail "ddpbench --mode $m --gpus 0,1,2: $(tail -3 "$T/out")"
done

# Uneven data: rank 2's 6 samples last 2 steps, the others' 8.  --no-join: it
# leaves and the others block in the all-reduce until --timeout, then exit 1
# naming it; --join (the default) trains to the end.
J="--backend cpu --layers 6,10,3 --samples 60 --loss mse --batch 9 --epochs 1 --rank-samples 24,15,6 --mode ddp --gpus 0,1,2"
shm_list >"$T/shm_before"
t0=$(now)
DDPBENCH_E2E_TAG=$TAG $BIN $J --no-join --timeout 2 >"$T/out" 2>"$T/err"
rc=$?
secs=$(elapsed "$t0")
[ $rc -eq 1 ] || fail "no-join: exit $rc, expected 1 ($(cat "$T/err"))"
grep -q "^ddpbench: error: rank [01] (device [01]): timed out in all-reduce of bucket 0: rank 2 did not arrive within 2 s (ranks 0 and 1: #5 all-reduce of bucket 0 (103 floats); rank 2: #4 all-reduce of bucket 0 (103 floats)); rank 2 ran out of data after step 2 (6 samples: 2 steps an epoch, rank 0 has 8) and left without --join: --join lets it shadow the others' all-reduces" "$T/err" ||
    fail "no-join: got '$(cat "$T/err")'"
slower "$secs" 4 && fail "no-join: took $secs s (--timeout 2 + 2)"
check_clean "no-join"
echo "e2e_ddp: no-join: exit $rc in $secs s: $(head -1 "$T/err")"
DDPBENCH_E2E_TAG=$TAG $BIN $J >"$T/out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "steps run/shadowed *8/0 *5/3 *2/6" "$T/out" && ok ||
    fail "join: exit $rc: $(cat "$T/out")"

e2e_finish
