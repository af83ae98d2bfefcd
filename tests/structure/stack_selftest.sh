#!/bin/sh
# tests/structure/stack_selftest.sh: stack.sh can fail.  A small planted tree
# holds each thing it must catch (a frame over the limit, a chain of small
# frames over the limit, an unbounded frame, a recursion nobody bounds, an
# object built without its call graph); a clean tree and an allowed
# recursion must pass.  Usage: sh tests/structure/stack_selftest.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CC=${CC:-cc}
fails=0
ko() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
# build SRC...: each source of $T/tree into $T/tree/build with its call graph
build() {
    for src in "$@"; do
        mkdir -p "$T/tree/build/$(dirname "$src")"
        $CC -O1 -fcallgraph-info=su -c "$T/tree/$src" -o "$T/tree/build/${src%.c}.o" || ko "cannot compile $src"
    done
}
mkdir -p "$T/tree/common/x" "$T/tree/app"
cat >"$T/tree/common/x/bad.c" <<'EOF'
#include <string.h>
#define NI __attribute__((noinline))
void sink(char *p);
/* one frame over 16 KiB */
NI void big_frame(void) { char b[20000]; sink(b); }
/* five frames of 15 KB each: none too big, the chain is */
NI void c5(void) { char b[15000]; sink(b); }
NI void c4(void) { char b[15000]; sink(b); c5(); sink(b); }
NI void c3(void) { char b[15000]; sink(b); c4(); sink(b); }
NI void c2(void) { char b[15000]; sink(b); c3(); sink(b); }
NI void chain_top(void) { char b[15000]; sink(b); c2(); sink(b); }
/* a variable-length array */
NI void vla(int n) { char b[n]; sink(b); }
/* recursion, allowed by name and not */
NI int walk_down(int n) { char b[64]; sink(b); return n ? walk_down(n - 1) + b[0] : 0; }
NI int add_row(int n) { char b[64]; sink(b); return n ? add_row(n - 1) + b[0] : 0; }
EOF
cat >"$T/tree/app/good.c" <<'EOF'
void sink(char *p) { (void)p; }
int main(void) { char b[256]; sink(b); return 0; }
EOF
build common/x/bad.c app/good.c
sh "$HERE/stack.sh" build "$T/tree" >"$T/out" 2>&1
rc=$?
[ $rc -eq 1 ] || ko "planted tree: exit $rc, expected 1: $(cat "$T/out")"
for want in "big_frame(20" "has a frame of unbounded size" "chain_top(15" \
    "walk_down (" ; do
    grep -qF "$want" "$T/out" || ko "planted tree: no line with '$want' in: $(cat "$T/out")"
done
grep -q "^stack: c2\|^stack: c3\|chain_top.*over 16384" "$T/out" &&
    ko "a 15 KB frame was called too large, or a chain said twice: $(cat "$T/out")"
grep -q "add_row.*recursive" "$T/out" && ko "add_row is allowed to recurse: $(cat "$T/out")"

# the clean half alone passes
rm -rf "$T/tree/common" "$T/tree/build/common"
sh "$HERE/stack.sh" build "$T/tree" >"$T/out" 2>&1 || ko "a clean tree failed: $(cat "$T/out")"

# an object without its call graph is not passed in silence
rm "$T/tree/build/app/good.ci"
sh "$HERE/stack.sh" build "$T/tree" >"$T/out" 2>&1 && ko "a missing .ci passed"
grep -q "has no call graph" "$T/out" || ko "a missing .ci: $(cat "$T/out")"

[ $fails -eq 0 ] && echo "stack_selftest: all passed" || echo "stack_selftest: $fails failed"
[ $fails -eq 0 ]
