#!/bin/sh
# tests/structure/stack.sh: nothing large lives on the stack (docs/faults.md:
# ddpbench runs under `ulimit -s 128`, and a thread's stack is that size too).
#
#   sh tests/structure/stack.sh [BUILD_DIR [ROOT]]
#
# The compiler writes each object's call graph beside it (gcc's
# -fcallgraph-info=su, a .ci file: every function's frame in bytes and the
# functions it calls directly; the Makefile passes it where the compiler
# has it).  The check reads the graphs of every object of the program's
# sources (common/, dp/, ddp/, app/) and proves:
# 1. no frame is over FRAME_MAX bytes (16 KiB: one config_t, 14 KB, fits;
#    a run's record, 79 KB, or an array of report_stats_t does not: those
#    live in static storage or on the heap);
# 2. no chain of direct calls, from any function down, adds up to more than
#    CHAIN_MAX bytes (64 KiB: half of the 128 KiB, the other half left to
#    the C library, OpenBLAS, cJSON and calls through pointers, which the
#    graph cannot follow; `ulimit -s 128` runs in tests/e2e/e2e_faults.sh
#    cover those);
# 3. no frame's size is unbounded (a variable-length array, alloca);
# 4. no function calls itself, directly or in a circle, unless it is named
#    in RECURSIVE below with what bounds its depth (its frame is counted
#    once).
# Exit 0 when all hold; otherwise one line per violation and exit 1.
set -u
B=${1:-build/release}
cd "${2:-$(dirname "$0")/../..}" || exit 1
FRAME_MAX=${STACK_FRAME_MAX:-16384}
CHAIN_MAX=${STACK_CHAIN_MAX:-65536}
# function: what bounds its depth
RECURSIVE="add_row keep_documented_order" # report_json.c: walk the JSON ddpbench builds (depth 3)

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
: >"$T/ci"
nobj=0
for src in common/*/*.c dp/*.c ddp/*.c app/*.c app/report/*.c; do
    o=$B/${src%.c}.o
    [ -f "$o" ] || continue # not built here (an MPI or CUDA file without them)
    nobj=$((nobj + 1))
    if [ ! -f "$B/${src%.c}.ci" ] || [ "$B/${src%.c}.ci" -ot "$src" ]; then
        echo "stack: $o has no call graph ($B/${src%.c}.ci): build with gcc (-fcallgraph-info=su)"
        exit 1
    fi
    echo "$B/${src%.c}.ci" >>"$T/ci"
done
[ "$nobj" -gt 0 ] || { echo "stack: no objects in $B: build first (make)"; exit 1; }

# shellcheck disable=SC2046
awk -v FRAME_MAX="$FRAME_MAX" -v CHAIN_MAX="$CHAIN_MAX" -v RECURSIVE="$RECURSIVE" '
function shown(n,   s) { s = n; sub(/^.*:/, "", s); return s "(" size[n] ")" }
# the deepest chain of frames from n: its bytes; the path in path[n]
function worst(n,   k, t, w, best, bt) {
    if (n in memo)
        return memo[n]
    state[n] = 1
    best = 0
    bt = ""
    for (k = 1; k <= nout[n]; k++) {
        t = out[n, k]
        if (!(t in size))
            continue # a library function: not ours to measure
        if (state[t] == 1) { # a circle: t calls back into itself
            nm = t
            sub(/^.*:/, "", nm)
            sub(/\..*$/, "", nm)
            if (!(nm in allowed) && !((n SUBSEP t) in said)) {
                said[n, t] = 1
                printf "stack: %s (%s) is recursive (called again from %s), and nothing here bounds its depth: name it in RECURSIVE with what bounds it\n", nm, where[t], shown(n)
                bad++
            }
            continue
        }
        w = worst(t)
        if (w > best) { best = w; bt = t }
    }
    state[n] = 2
    memo[n] = size[n] + best
    next_of[n] = bt
    return memo[n]
}
BEGIN {
    split(RECURSIVE, r, " ")
    for (i in r) allowed[r[i]] = 1
}
/^node: \{ title: "/ {
    title = $0
    sub(/^node: \{ title: "/, "", title)
    sub(/".*$/, "", title)
    if (match($0, /\\n[0-9]+ bytes \([a-z,]*\)/)) {
        lab = substr($0, RSTART + 2, RLENGTH - 2)
        split(lab, f, " ")
        size[title] = f[1] + 0
        kind[title] = f[3]
        loc = $0
        sub(/^[^\\]*\\n/, "", loc)
        sub(/\\n.*$/, "", loc)
        where[title] = loc
    }
    next
}
/^edge: \{ sourcename: "/ {
    s = $0
    sub(/^edge: \{ sourcename: "/, "", s)
    t = s
    sub(/".*$/, "", s)
    sub(/^[^"]*" targetname: "/, "", t)
    sub(/".*$/, "", t)
    out[s, ++nout[s]] = t
    called[t] = 1
}
END {
    for (n in size) {
        if (size[n] > FRAME_MAX) {
            printf "stack: %s (%s) has a frame of %d bytes, over %d: put what is large in static storage or on the heap\n", shown(n), where[n], size[n], FRAME_MAX
            bad++
        }
        if (kind[n] ~ /dynamic/ && kind[n] !~ /bounded/) {
            printf "stack: %s (%s) has a frame of unbounded size (a variable-length array or alloca)\n", shown(n), where[n]
            bad++
        }
    }
    deepest = 0
    for (n in size) {
        w = worst(n)
        if (w > deepest) { deepest = w; top = n }
        if (w > CHAIN_MAX && !(n in called)) { # said once, from the top of the chain
            chain = shown(n)
            for (m = next_of[n]; m != ""; m = next_of[m])
                chain = chain " > " shown(m)
            printf "stack: a chain of calls needs %d bytes of stack, over %d: %s\n", w, CHAIN_MAX, chain
            bad++
        }
    }
    chain = shown(top)
    for (m = next_of[top]; m != ""; m = next_of[m])
        chain = chain " > " shown(m)
    printf "stack: %d functions; the deepest chain of direct calls %d bytes (limit %d): %s\n", length(size), deepest, CHAIN_MAX, chain
    exit bad ? 1 : 0
}' $(cat "$T/ci")
