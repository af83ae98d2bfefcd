#!/bin/sh
# tests/structure/layers_selftest.sh: tests/structure/layers.sh can fail.
#
# Builds a small tree of two floors (lo below hi) that keeps every rule, checks
# that layers.sh passes it, then plants one violation at a time and checks
# that layers.sh fails naming it: an include that runs up a floor, an include
# without its folder, another floor's _impl.h, a README circle, a call that
# runs up a floor, objects that call each other in a circle, a folder without
# a README, a file outside the floors, one strategy using another, a floor
# including the program, an include from a second root, a strategy using the
# program's outputs, the outputs including the program, the program
# including a strategy (but the launcher's seam), the program's floor
# including the launcher, a step without its fences, too long, or with the
# meter inside, a module of common/ only the program uses, one only one mode
# uses (a backend behind a seam every mode uses passes; one that implements
# no seam fails), one no longer named in the string that looked it up
# (dlsym), and a comment naming a file that is gone.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
export LAYERS_FENCED=dp/dp.c
export LAYERS_MODES="single=common/hi/single dp=dp ddp=ddp"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
pass=0

make_tree() {
    rm -rf "$T/tree"
    mkdir -p "$T/tree/common/lo" "$T/tree/common/hi" "$T/tree/dp" "$T/tree/ddp" \
        "$T/tree/app/report" "$T/tree/b/common/lo" "$T/tree/b/common/hi" "$T/tree/b/dp" \
        "$T/tree/b/ddp" "$T/tree/b/app/report"
    cd "$T/tree" || exit 1
    printf '# lo\n\nThe ground.\n\nMay include: nothing\n' >common/lo/README.md
    printf '# hi\n\nOn lo.\n\nMay include: lo/\n' >common/hi/README.md
    printf 'int lo_f(void);\n' >common/lo/lo.h
    # lo_dl is reached through the string that names it alone, as dlsym would
    printf '#include "common/lo/lo.h"\n#include "common/lo/lo_impl.h"\nconst char *lo_dl_name = "lo_dl";\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
    printf 'int lo_dl(void) { return 3; }\n' >common/lo/dl.c
    # a backend behind lo's seam that dp alone creates: reached where lo is
    printf '#include "common/lo/lo_impl.h"\nint lo_alt(void) { return 4; }\n' >common/lo/alt.c
    printf 'int lo_g(void);\n' >common/lo/lo_impl.h
    printf 'int hi_f(void);\n' >common/hi/hi.h
    printf '#include "common/hi/hi.h"\n#include "common/lo/lo.h"\nint hi_f(void) { return lo_f(); }\n' >common/hi/hi.c
    printf 'int dp_f(void);\nint ddp_f(void);\n' >common/hi/strategy.h
    printf '#include "common/hi/strategy.h"\n#include "common/hi/hi.h"\nint single_f(void) { return hi_f(); }\n' >common/hi/single.c
    printf '#include "common/hi/strategy.h"\n#include "common/hi/hi.h"\n// ---- TRAINING STEP BEGIN\nint lo_alt(void);\nint dp_f(void) { return hi_f() + lo_alt(); }\n// ---- TRAINING STEP END\n' >dp/dp.c
    printf '#include "common/hi/strategy.h"\n#include "common/hi/hi.h"\nint ddp_f(void) { return hi_f(); }\n' >ddp/ddp.c
    printf '# report\n\nOn lo.\n\nMay include: lo/\n' >app/report/README.md
    printf 'int rep_f(void);\n' >app/report/rep.h
    printf '#include "app/report/rep.h"\n#include "common/lo/lo.h"\nint rep_f(void) { return lo_f(); }\n' >app/report/rep.c
    printf 'int launch_f(void);\n' >ddp/launcher.h
    printf '#include "common/hi/strategy.h"\n#include "ddp/launcher.h"\n#include "app/report/rep.h"\nint main(void) { return dp_f() + ddp_f() + rep_f(); }\n' >app/main.c
    printf 'int app_h;\n' >app/app.h
}

# the objects, each compiled once per source text (a case changes one or two
# files; compiling all five again for each case was most of this test's time)
mkdir -p "$T/cache"
build() {
    for c in $(find common dp ddp app -name '*.c'); do
        o="$T/cache/$(echo "$c" | tr / _)-$(cksum <"$c" | tr ' ' -).o"
        [ -f "$o" ] || cc -I. -c "$c" -o "$o" || exit 1
        mkdir -p "b/$(dirname "$c")"
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

printf '#include "common/hi/hi.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "include up" "lo/ may not include hi/"

printf '#include "lo.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "include without folder" 'not named from the root'

# (compiled out: the compiler finds no second root, the check reads the line)
printf '#if 0\n#include "lo/lo.h"\n#endif\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "include from a second root" 'not named from the root'

printf '#include "common/lo/lo_impl.h"\n#include "common/lo/lo.h"\nint hi_f(void) { return lo_f(); }\n' >common/hi/hi.c
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

printf 'int ddp_f(void);\nint dp_f(void) { return ddp_f(); }\n' >dp/dp.c
expect_fail "a strategy calling another" "dp/ may not use ddp/"

printf '#include "ddp/ddp.h"\nint dp_f(void) { return 1; }\n' >dp/dp.c
printf 'int ddp_f(void);\n' >ddp/ddp.h
expect_fail "a strategy including another" "dp/ may not include ddp/"

printf '#include "app/app.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "a floor including the program" "lo/ may not include app/"

printf '#include "app/report/rep.h"\nint dp_f(void) { return 1; }\n' >dp/dp.c
expect_fail "a strategy including the program's outputs" "dp/ may not include report/"

printf '#include "app/app.h"\nint rep_f(void) { return 1; }\n' >app/report/rep.c
expect_fail "the outputs including the program" "report/ may not include app/"

printf 'int rep_f(void);\nint dp_f(void) { return rep_f(); }\n' >dp/dp.c
expect_fail "a strategy calling the outputs" "dp/ may not use report/"

printf '#include "ddp/ddp.h"\nint main(void) { return 0; }\n' >app/main.c
printf 'int ddp_f(void);\n' >ddp/ddp.h
expect_fail "the program including a strategy" "app/ talks to the strategies through their seams alone"

printf '#include "ddp/launcher.h"\n#include "app/report/rep.h"\nint rep_f(void) { return 1; }\n' >app/report/rep.c
expect_fail "the program's floor including the launcher" "report/ may not include ddp/"

printf 'int dp_f(void) { return 1; }\n' >dp/dp.c
expect_fail "a step without its fences" "0 TRAINING STEP BEGIN"

{ echo '// ---- TRAINING STEP BEGIN'; echo 'int dp_f(void) {'; i=0
  while [ $i -lt 40 ]; do echo '    (void)0;'; i=$((i + 1)); done; echo '    return 1; }'
  echo '// ---- TRAINING STEP END'; } >dp/dp.c
expect_fail "a step too long" "lines of code (at most 40)"

printf '// ---- TRAINING STEP BEGIN\nvoid step_meter_lap(int);\nint dp_f(void) { step_meter_lap(1); return 1; }\n// ---- TRAINING STEP END\n' >dp/dp.c
expect_fail "the meter inside the step" "bookkeeping that belongs around it"

printf 'int prog_f(void);\n' >common/lo/prog.h
printf '#include "common/lo/prog.h"\nint prog_f(void) { return 4; }\n' >common/lo/prog.c
printf '#include "common/hi/strategy.h"\n#include "common/lo/prog.h"\nint main(void) { return dp_f() + ddp_f() + prog_f(); }\n' >app/main.c
expect_fail "a module of common/ only the program uses" "common/lo/prog: not reached by single, dp, ddp (only the program)"

printf 'int only_f(void);\n' >common/hi/only.h
printf '#include "common/hi/strategy.h"\n#include "common/hi/hi.h"\n#include "common/hi/only.h"\nint ddp_f(void) { return hi_f(); }\n' >ddp/ddp.c
expect_fail "a module of common/ one mode uses" "common/hi/only: not reached by single, dp (only ddp)"

printf '#include "common/lo/lo.h"\n#include "common/lo/lo_impl.h"\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "a module no string names any more" "common/lo/dl: not reached by single, dp, ddp"

printf 'int lo_alt(void) { return 4; }\n' >common/lo/alt.c
expect_fail "one mode's module that implements no seam" "common/lo/alt: not reached by single, ddp (only dp)"

printf '/* moved to common/lo/gone.c */\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "a source naming a path that is gone" "names common/lo/gone.c, which is no file of the tree"

printf '/* as in old_name.c */\nint lo_f(void) { return 1; }\n' >common/lo/lo.c
expect_fail "a source naming a file that is gone" "names old_name.c, which is no file of the tree"

echo "layers_selftest: $pass passed, $fails failed"
[ $fails -eq 0 ]
