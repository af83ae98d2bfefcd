#!/bin/sh
# bench/syscalls_ab.sh: system calls a step of two builds side by side, ABBA.
# The same count as tests/e2e/e2e_syscalls.sh (perf stat -e
# raw_syscalls:sys_enter over every thread and process, divided by the
# steps, seed-size model, CPU backend, shm), for the cases that test bounds,
# in rounds A B B A so a busy minute falls on both builds.
# usage: sh bench/syscalls_ab.sh BASE_BIN THIS_BIN [ROUNDS]
# Prints one line a run: round, side (A = BASE_BIN, B = THIS_BIN), case,
# calls a step, the 1-minute load at its end.
A=$1; B=$2; R=${3:-2}; N=20000
SEED="--layers 10,10 --loss mse --optim sgd --batch 20 --steps $N --warmup-steps 100 --quiet"
one() { # side bin label opts
  c=$(perf stat -x, -e raw_syscalls:sys_enter -- $2 $4 >/dev/null 2>/tmp/sc.$$ ; grep raw_syscalls /tmp/sc.$$ | cut -d, -f1)
  echo "$r $1 $3 $(echo "scale=5; $c/$N" | bc) $(cut -d' ' -f1 /proc/loadavg)"
}
cases() { # side bin
  one $1 $2 single "--mode single $SEED"
  one $1 $2 single_--json "--mode single $SEED --json"
  one $1 $2 dp_--gpus_0,1 "--mode dp --gpus 0,1 $SEED"
  one $1 $2 ddp_--gpus_0,1 "--mode ddp --gpus 0,1 $SEED"
  one $1 $2 ddp_--gpus_0,1_--json "--mode ddp --gpus 0,1 $SEED --json"
}
echo "# syscalls a step (perf raw_syscalls:sys_enter, $N steps, seed-size), ABBA x$R: round side(A=$A, B=$B) mode count/step load1"
r=1; while [ $r -le $R ]; do cases A $A; cases B $B; cases B $B; cases A $A; r=$((r+1)); done
