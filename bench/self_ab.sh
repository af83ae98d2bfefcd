#!/bin/sh
# bench/self_ab.sh: the instrument's own fixed cost, gated by the instrument.
# The A/B gate (--against) runs this build and an older one on the seed-size
# model (10,10, batch 20, bench_stability's seed options), where a step is
# nearly all fixed cost (the meter's laps, DP's barriers, DDP's exchange),
# in ABBA rounds, and judges the median step.  So a change that makes the
# meter heavier (a system call per lap: 7x the seed-size step) is a
# "regressed" of the project's own tool, as any other slowdown is.
#
# Why the median step and not the gate's CPU figure (work_cpu_s): the work is
# taken from a sample of the steps (step_meter.h), and a sampled step reads
# the CPU clock at its laps, so it carries the readings whatever the build;
# what a build's meter costs the other steps is in their wall time.  Each
# side runs through a wrapper that leaves work_cpu_s out of its JSON, and a
# gate given no work judges the median step (docs/gate.md).
#
# usage: sh bench/self_ab.sh -B BASE [-b BIN] [-m MODES] [-t PCT] [-r ROUNDS]
#   -B BASE    the older build (its ddpbench)
#   -b BIN     this build [./ddpbench]
#   -m MODES   ["single dp ddp"]
#   -t PCT     --tolerance [5]
#   -r ROUNDS  --repeat [10]
# Prints each gate's verdict lines; exits with the worst status (3 when any
# mode regressed, 4 when any gave no verdict, 0 otherwise).
set -u
BIN=./ddpbench
BASE=
MODES="single dp ddp"
TOL=5
ROUNDS=10
while getopts B:b:m:t:r: opt; do
    case $opt in
    B) BASE=$OPTARG ;;
    b) BIN=$OPTARG ;;
    m) MODES=$OPTARG ;;
    t) TOL=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    *) exit 2 ;;
    esac
done
if [ -z "$BASE" ] || [ ! -x "$BASE" ] || [ ! -x "$BIN" ]; then
    echo "usage: sh bench/self_ab.sh -B BASE [-b BIN] [-m MODES] [-t PCT] [-r ROUNDS]" >&2
    exit 2
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
wrap() { # name, binary: a wrapper that runs it and drops work_cpu_s from its JSON
    cat >"$T/$1" <<EOF
#!/bin/sh
"$(abs "$2")" "\$@" >"$T/$1.out"
rc=\$?
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    s = line.strip()
    if s.startswith("{"):
        d = json.loads(s)
        d.pop("work_cpu_s", None)
        for dev in d.get("devices", []):
            dev.pop("work_cpu_s", None)
        print(json.dumps(d))
    elif s:
        print(s)
' "$T/$1.out"
exit \$rc
EOF
    chmod +x "$T/$1"
}
wrap base "$BASE"
wrap cand "$BIN"
SEED="--backend cpu --layers 10,10 --loss mse --optim sgd --batch 20 --steps 30000 --warmup-steps 3000"
worst=0
echo "# self_ab: $(abs "$BIN") against $(abs "$BASE"), the median seed-size step, tolerance $TOL%; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for m in $MODES; do
    g=
    [ "$m" = single ] || g="--gpus 0,1"
    echo "## $m"
    # shellcheck disable=SC2086 # the options are meant to split
    "$BIN" --mode "$m" $g $SEED --against "$T/base" --candidate "$T/cand" --tolerance "$TOL" \
        --repeat "$ROUNDS" >"$T/gate.txt" 2>&1
    rc=$?
    grep -E "^candidate / base|^verdict|^ddpbench: error" "$T/gate.txt"
    case $rc in
    3) worst=3 ;;
    4) [ $worst = 3 ] || worst=4 ;;
    0) ;;
    *) [ $worst = 0 ] && worst=$rc ;;
    esac
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $worst
