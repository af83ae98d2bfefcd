#!/bin/sh
# tests/structure/layers_selftest.sh: tests/structure/layers.sh can fail.
#
# Builds a small tree of two floors (lo below hi) that keeps every rule, checks
# that layers.sh passes it, then plants one violation at a time and checks
# that layers.sh fails naming it: an include that runs up a floor, an include
# without its folder, another floor's _impl.h, a README circle, a call that
# runs up a floor, objects that call each other in a circle, a folder without
# a README, a file outside the floors, one strategy using another, a floor
# including the program.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
pass=0

make_tree() {
    rm -rf "$T/tree"
    mkdir -p "$T/tree/common/lo" "$T/tree/common/hi" "$T/tree/strategies/dp" \
        "$T/tree/strategies/ddp" "$T/tree/app" "$T/tree/b/common/lo" "$T/tree/b/common/hi" \
        "$T/tree/b/strategies/dp" "$T/tree/b/strategies/ddp" "$T/tree/b/app"
    cd "$T/tree" || exit 1
    printf '# lo\n\nThe ground.\n\nMay include: nothing\n' >common/lo/README.md
    printf '# hi\n\nOn lo.\n\nMay include: lo/\n' >common/hi/README.md
    printf 'int lo_f(void);\n' >common/lo/lo.h
    printf '#include "lo/lo.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
    printf 'int lo_g(void);\n' >common/lo/lo_impl.h
    printf 'int hi_f(void);\n' >common/hi/hi.h
    printf '#include "hi/hi.h"\n#include "lo/lo.h"\nint hi_f(void) { return lo_f(); }\n' >common/hi/hi.c
    printf 'int dp_f(void);\nint ddp_f(void);\n' >strategies/strategy.h
    printf '#include "hi/hi.h"\nint dp_f(void) { return hi_f(); }\n' >strategies/dp/dp.c
    printf 'int ddp_f(void) { return 2; }\n' >strategies/ddp/ddp.c
    printf '#include "strategies/strategy.h"\nint main(void) { return dp_f() + ddp_f(); }\n' >app/main.c
    printf 'int app_h;\n' >app/app.h
}

# the objects, each compiled once per source text (a case changes one or two
# files; compiling all five again for each case was most of this test's time)
mkdir -p "$T/cache"
build() {
    for c in common/lo/lo.c common/hi/hi.c strategies/dp/dp.c strategies/ddp/ddp.c app/main.c; do
        o="$T/cache/$(echo "$c" | tr / _)-$(cksum <"$c" | tr ' ' -).o"
        [ -f "$o" ] || cc -Icommon -Istrategies -I. -c "$c" -o "$o" || exit 1
        cp "$o" "b/${c%.c}.o"
    done
}

# expect_fail WHAT WORDS: layers.sh fails and its output holds WORDS
expect_fail() {
    build
    out=$(sh "$HERE/layers.sh" "$T/tree/b" "$T/tree" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && echo "$out" | grep -qF -- "$2"; then
        pass=$((pass + 1))
    else
        echo "FAIL: $1: exit $rc, '$2' not in: $out"
        fails=$((fails + 1))
    fi
    make_tree
}

make_tree
build
if out=$(sh "$HERE/layers.sh" "$T/tree/b" "$T/tree" 2>&1); then
    pass=$((pass + 1))
else
    echo "FAIL: the clean tree: $out"
    fails=$((fails + 1))
fi

printf '#include "hi/hi.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "include up" "lo/ may not include hi/"

printf '#include "lo.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "include without folder" 'without its folder'

printf '#include "lo/lo_impl.h"\n#include "lo/lo.h"\nint hi_f(void) { return lo_f(); }\n' >common/hi/hi.c
expect_fail "another floor's _impl.h" "only lo/'s implementers may"

printf '# lo\n\nMay include: hi/\n' >common/lo/README.md
expect_fail "README circle" "make a circle"

printf 'int hi_f(void);\nint lo_f(void) { return hi_f(); }\n' >common/lo/lo.c
expect_fail "call up" "calls hi_f"

printf 'int lo_g(void);\nint lo_f(void) { return lo_g(); }\n' >common/lo/lo.c
printf 'int lo_f(void);\nint lo_g(void) { return lo_f(); }\n' >common/lo/lo2.c
cc -c common/lo/lo2.c -o b/common/lo/lo2.o
expect_fail "call circle" "call each other in a circle"

rm common/hi/README.md
expect_fail "no README" "no README.md"

printf 'int x;\n' >common/stray.c
expect_fail "file outside the floors" "outside the floors"

printf 'int ddp_f(void);\nint dp_f(void) { return ddp_f(); }\n' >strategies/dp/dp.c
expect_fail "a strategy calling another" "dp/ may not use ddp/"

printf '#include "ddp/ddp.h"\nint dp_f(void) { return 1; }\n' >strategies/dp/dp.c
printf 'int ddp_f(void);\n' >strategies/ddp/ddp.h
expect_fail "a strategy including another" "dp/ may not include ddp/"

printf '#include "app/app.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "a floor including the program" "lo/ may not include app/"

echo "layers_selftest: $pass passed, $fails failed"
[ $fails -eq 0 ]
