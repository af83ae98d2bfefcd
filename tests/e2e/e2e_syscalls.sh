#!/bin/sh
# tests/e2e/e2e_syscalls.sh: the instrument weighs nothing.  The system calls
# of a whole run (every process and thread), divided by its steps, on the
# seed-size model (10,10, batch 20, CPU backend, shm comm), 20,000 steps, at
# most: single 0.2, dp (2 devices) 3, ddp (2 ranks) 1.  The runs are the
# default and the gate's (--json: what --against's children run).
#
# Counted by the kernel's raw_syscalls:sys_enter tracepoint (perf stat,
# inherited by every thread and child): exact, and it leaves the run as it
# is.  strace -f -c counts the same calls but stops the process at each one
# (ptrace), and the run it counts is another: a device stopped for 50 us in
# its tracer outlasts its peer's 30 us spin, the peer sleeps (a futex), the
# step grows past the work sample's 2 ms, every step reads its CPU clock:
# the same DP run counted 0.24 calls a step by perf and 2.7 by strace.
# What still moves the count on a busy machine: the futex sleeps when a
# device is scheduled out, and the work sample's clock readings, one step
# each 2 ms, more of them in a run slowed down.  Measured on this project's
# 2-core machine at load 0.5-7: single 0.03-0.06, dp 0.2-0.5, ddp 0.05-0.2 a
# step, each at least 5x under its bound (before the meter read its clocks
# by sampling: 6.1, 39.7 and 18.9; tests/e2e/e2e_syscalls.sh run against that
# build fails every check).  With the descheduled phase read in the same
# sampled steps (a pread of the thread's schedstat at each end), six runs of
# each build interleaved at load 7.5-8.4: single 0.050 (0.046-0.059), dp 0.29
# (0.17-0.32), ddp 0.39 (0.25-0.64), against 0.045, 0.25 and 0.145 before it:
# ddp's margin under its bound is 1.6x at that load.
# The bounds are those of each device on a core of its own
# (common/base/affinity.h): two DP devices or DDP ranks on one core can only
# hand work to each other through the scheduler, a futex call each time (12
# a DP step, 5 a DDP step, under taskset -c 0 here).  So the runs may use
# every online CPU, whatever CPUs this script was started on; where one CPU
# is all there is, the single run alone has a bound to hold.
E2E=e2e_syscalls
. "$(dirname "$0")/lib.sh"
NCPU=$(getconf _NPROCESSORS_ONLN)
ALL=
if [ "$NCPU" -ge 2 ] && need taskset; then ALL="taskset -c $(cat /sys/devices/system/cpu/online)"; fi

STEPS=20000
SEED="--backend cpu --layers 10,10 --batch 20 --steps $STEPS --comm shm --quiet"

# calls per step of one run: the tracepoint's count over every process
per_step() { # out, args...
    out=$1
    shift
    # shellcheck disable=SC2086 # the options are meant to split
    perf stat -x, -e raw_syscalls:sys_enter -o "$out" -- $ALL "$BIN" "$@" >"$out.stdout" \
        2>"$out.stderr" || {
        echo "run failed: $* ($(tail -1 "$out.stderr"))" >&2
        echo 1e9
        return
    }
    awk -F, -v n=$STEPS '/raw_syscalls:sys_enter/ { print $1 / n }' "$out"
}

# the calls by name, for a failure's message (perf's per-call tracepoints)
by_name() { # args...
    # shellcheck disable=SC2086
    perf stat -x, -e 'syscalls:sys_enter_*' -o "$T/names" -- $ALL "$BIN" "$@" >/dev/null 2>&1
    sort -t, -k1 -n -r "$T/names" | awk -F, 'NR <= 5 && $1 > 0 { sub("syscalls:sys_enter_", "", $3); printf "%s %s, ", $3, $1 }'
}

check() { # label, bound, args...
    label=$1
    bound=$2
    shift 2
    v=$(per_step "$T/$label" "$@")
    if awk -v v="$v" -v b="$bound" 'BEGIN { exit !(v <= b) }'; then
        ok
        echo "$E2E: $label: $v system calls a step (at most $bound)"
    else
        ko "$label: $v system calls a step, more than $bound: $(by_name "$@")"
    fi
}

if need perf && ! perf stat -x, -e raw_syscalls:sys_enter -o /dev/null true 2>/dev/null; then
    ko "perf cannot count system calls here (the raw_syscalls tracepoint needs root, or kernel.perf_event_paranoid -1, and tracefs)"
elif command -v perf >/dev/null; then
    # shellcheck disable=SC2086
    check single 0.2 --mode single $SEED
    # the gate's children: the same runs with --json
    # shellcheck disable=SC2086
    check "single --json" 0.2 --mode single --json $SEED
    if [ "$NCPU" -ge 2 ]; then
        # shellcheck disable=SC2086
        check dp 3 --mode dp --gpus 0,1 $SEED
        # shellcheck disable=SC2086
        check ddp 1 --mode ddp --gpus 0,1 $SEED
        # shellcheck disable=SC2086
        check "ddp --json" 1 --mode ddp --gpus 0,1 --json $SEED
    else
        echo "$E2E: one CPU online: DP's devices and DDP's ranks share it, and pass work through the scheduler"
    fi
fi
e2e_finish
