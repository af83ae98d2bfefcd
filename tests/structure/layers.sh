#!/bin/sh
# tests/structure/layers.sh: the floors hold (common/README.md, docs/architecture.md).
#
#   sh tests/structure/layers.sh [BUILD_DIR [ROOT]]
#
# BUILD_DIR holds the objects (default build/release), ROOT the tree (default
# this repository; tests/structure/layers_selftest.sh points it at a small
# planted tree to prove each check can fail).
#
# The floors are the folders of common/, of the program (app/report/,
# app/predict/, ...) and the gate's room (gate/), each named by its folder
# (no two alike).  Each floor's
# README.md ends with "May include: a/, b/": the floors below it that it
# stands on.  The check reads those lines and then proves:
# 1. the floors' own graph has no circle (tsort), and every folder of common/
#    and app/ is a floor with such a README;
# 2. includes: every include is named from the one root, the repository's
#    top ("common/device/backend.h", "ddp/reducer.h"); a file includes only
#    its own floor and the floors it may include; an _impl.h only from its
#    own floor (the implementers); common/ never includes dp/, ddp/, app/ or
#    bench/; the strategies (dp/, ddp/) stand on all of common/ (whose
#    train/strategy.h is their seam) but never on each other, app/ or
#    bench/, nor on the program's floors or the gate; app/ (the program)
#    stands on all of those, never on bench/, and includes no file of the
#    strategies but
#    $SEAMS (it talks to them through common/train/strategy.h and the
#    process topology's ddp/launcher.h alone);
# 3. calls, read from the objects with nm: the same rule for every call from
#    one object into another, and no objects call each other in a circle;
# 4. common/ is the shared core: each of its modules (a header, or an object
#    built here) is reached, through includes and calls, by every mode
#    ($MODES: single from train/single.c, dp/ and ddp/); a function named in
#    a string counts as called (dlsym), and a seam reaches its implementers
#    (the modules that include its _impl.h: the backend that runs is chosen
#    at run time);
# 5. each strategy's step is one block fenced by "// ---- TRAINING STEP
#    BEGIN" and "// ---- TRAINING STEP END" (in $FENCED, one file each), at
#    most 40 lines of code (blank and comment lines aside), with nothing of
#    the bookkeeping around it inside: the meter, faults, graphs, the
#    straggler, --trace or --explain (step_meter_, fault_, graph_, straggle,
#    trace_, story);
# 6. every file a source names ("common/train/graph.c", "measure/disturb.h",
#    "rank_setup.c") is a file of the tree.
# Exit 0 when all hold; otherwise one line per violation and exit 1.
set -u
B=${1:-build/release}
cd "${2:-$(dirname "$0")/../..}" || exit 1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bad=0
say() {
    echo "layers: $*"
    bad=$((bad + 1))
}

# ---- 1. the floors and what each may include ------------------------------------
FLOORS=""
: >"$T/floors"
: >"$T/cfloors"
for d in common/*/ app/*/ gate/; do
    [ -d "$d" ] || continue
    f=$(basename "$d")
    case " $FLOORS " in *" $f "*) say "${d%/}: a second floor named $f/ (floors are named by their folder)" ;; esac
    FLOORS="$FLOORS $f"
    case $d in common/*) echo "$f" >>"$T/cfloors" ;; esac
    if [ ! -s "$d/README.md" ]; then
        say "${d%/}: no README.md saying what it owns and may include"
        continue
    fi
    may=$(sed -n 's/^May include: *//p' "$d/README.md" | tr -d '/,.' | sed 's/nothing.*//')
    [ -n "$(grep '^May include:' "$d/README.md")" ] ||
        say "${d}README.md: no 'May include:' line"
    echo "$may" >"$T/may.$f"
    for g in $may; do
        [ -d "common/$g" ] || [ -d "app/$g" ] || [ "$g" = gate ] || say "${d}README.md: may include $g/, which is not a floor"
        echo "$g $f" >>"$T/floors" # g stands below f
    done
done
for f in $FLOORS; do echo "$f $f"; done >>"$T/floors"
tsort "$T/floors" >/dev/null 2>"$T/loop" ||
    say "the floors' READMEs make a circle: $(grep -v 'contains a loop' "$T/loop" | sed 's/^tsort: //' | tr '\n' ' ')"
for f in common/*.c common/*.h common/*.cu; do
    [ -e "$f" ] && say "$f: a file outside the floors"
done

# The rules below are one awk library (RULES), so that a check is one awk
# over every include or call: a shell function and two forks for each of
# them took over a minute.
#  floor_of(PATH): the floor of a file or object under common/ or app/ (its
#    folder there: "base", "report"); else its top folder (dp, ddp, app,
#    bench)
#  may(FROM, TO): may a file of FROM use TO?  (floors, the strategies, app,
#    bench)
#  load() reads "$T/mays" (a floor and what its README lets it include, one
#  floor a line), "$T/strats" (the strategies' folders) and "$T/cfloors"
#  (the floors of common/)
STRATS="dp ddp"
echo "$STRATS" | tr ' ' '\n' >"$T/strats"
SEAMS=${LAYERS_SEAMS-ddp/launcher.h}
for f in $FLOORS; do
    [ -f "$T/may.$f" ] && echo "$f $(cat "$T/may.$f")"
done >"$T/mays"
RULES='
function load(   line, n, w, i) {
    while ((getline line < (T "/strats")) > 0)
        if (line != "") strat[line] = 1
    while ((getline line < (T "/floors")) > 0) {
        split(line, w, " ")
        isfloor[w[1]] = isfloor[w[2]] = 1
    }
    while ((getline line < (T "/mays")) > 0) {
        n = split(line, w, " ")
        for (i = 2; i <= n; i++) ok[w[1], w[i]] = 1
    }
    while ((getline line < (T "/cfloors")) > 0)
        if (line != "") cfloor[line] = 1
}
function floor_of(p,   f) {
    if (p ~ /^common\/.*\//) { f = substr(p, 8); sub(/\/.*/, "", f); return f }
    if (p ~ /^app\/.*\//) { f = substr(p, 5); sub(/\/.*/, "", f); return f }
    f = p; sub(/\/.*/, "", f); return f
}
# the program (app) or one of its floors
function program(a) { return a == "app" || (a in isfloor && !(a in cfloor)) }
function may(a, b) {
    if (a == b) return 1
    if (a == "app") return b != "bench"
    if (a == "bench") return 1
    if (a in strat) return (b in cfloor)
    return ((a, b) in ok)
}
# a module: a file without its extension (foo.c, foo.h and foo.o are one)
function stem(p) { sub(/(\.cu)?\.(c|h|cuh|o)$/, "", p); return p }
function exists(p,   r, x) {
    if (!(p in seen)) {
        r = (getline x < p)
        if (r >= 0) close(p)
        seen[p] = r >= 0
    }
    return seen[p]
}'

# ---- 2. includes ----------------------------------------------------------------
find common dp ddp app gate -type f 2>/dev/null | grep -E '\.(c|h|cu|cuh)$' | sort |
    awk -v T="$T" -v B="$B" -v seams="$SEAMS" "$RULES"'
BEGIN { load(); n = split(seams, w, " "); for (i = 1; i <= n; i++) seam[w[i]] = 1 }
{
    f = $0
    me = floor_of(f)
    while ((getline line < f) > 0) {
        if (line !~ /^[ \t]*#[ \t]*include[ \t]*"[^"]*"/) continue
        h = line
        sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", h)
        sub(/".*/, "", h)
        if (h !~ /^(common|dp|ddp|app|gate|bench)\//) {
            print f ": includes \"" h "\" not named from the root (common/, dp/, ddp/, app/, gate/)"
            continue
        }
        path = h
        # a header made by the build (app/twin_body.h) is in the build folder
        if (!exists(path)) {
            if (!exists(B "/" h)) print f ": includes \"" h "\", which does not exist"
            continue
        }
        his = floor_of(path)
        print stem(f), stem(h) > (T "/incs")
        # an implementer of a seam (it includes the seam'"'"'s _impl.h) is reached
        # wherever the seam is: which backend runs is chosen at run time
        if (h ~ /_impl\.h$/) { seamh = h; sub(/_impl\.h$/, ".h", seamh); print stem(seamh), stem(f) > (T "/incs") }
        if (!may(me, his)) print f ": includes " h ", but " me "/ may not include " his "/"
        else if (program(me) && (his in strat) && !(me == "app" && (h in seam)))
            print f ": includes " h ", but app/ talks to the strategies through their seams alone (common/train/strategy.h, " seams ")"
        if (h ~ /_impl\.h$/ && me != his) print f ": includes " h ", which only " his "/'"'"'s implementers may"
    }
    close(f)
}' >"$T/said"
while IFS= read -r l; do say "$l"; done <"$T/said"

# ---- 3. calls between objects -----------------------------------------------------
if [ ! -d "$B/common" ]; then
    say "$B/common: no objects (build first: make)"
else
    # shellcheck disable=SC2046 # one argument per object
    set -- $(find "$B/common" "$B/dp" "$B/ddp" "$B/app" "$B/gate" -name '*.o' 2>/dev/null | sort)
    # nm -A: each line "object:value type symbol" (undefined: "object: U symbol")
    nm -A -g --defined-only "$@" | awk 'NF == 3 && $2 ~ /[TDBRCVW]/ { print $3, substr($1, 1, index($1, ":") - 1) }' |
        sort -u >"$T/defs"
    nm -A -u "$@" | awk '{ print substr($1, 1, index($1, ":") - 1), $NF }' >"$T/undefs"
    awk 'NR == FNR { d[$1] = $2; next } ($2 in d) && d[$2] != $1 { print $1, d[$2], $2 }' \
        "$T/defs" "$T/undefs" | sed "s#$B/##g" | sort -u >"$T/edges"
    [ -s "$T/edges" ] || say "$B: no calls between objects found (is nm installed?)"
    awk -v T="$T" "$RULES"'
BEGIN { load() }
{
    a = floor_of($1)
    b = floor_of($2)
    if (!may(a, b)) print $1 " calls " $3 " in " $2 ", but " a "/ may not use " b "/"
}' "$T/edges" >"$T/said"
    while IFS= read -r l; do say "$l"; done <"$T/said"
    awk '{ print $1, $2 }' "$T/edges" | sort -u >"$T/pairs"
    : >>"$T/incs"
    tsort "$T/pairs" >/dev/null 2>"$T/loop" ||
        say "objects call each other in a circle: $(grep -v 'contains a loop' "$T/loop" | sed 's/^tsort: //' | tr '\n' ' ')"
fi

# ---- 4. the shared core ----------------------------------------------------------
# common/ holds what single, dp and ddp share: every module of it (a header,
# or an object built here) is reached by each mode, through includes and
# calls, from its roots (single: train/single.c; dp: dp/; ddp: ddp/).  A
# function named in a string counts as called: the CUDA library's entry
# points are looked up by name (dlsym, device/cuda_lib.c); a seam reaches the
# backends behind it (check 2 adds those edges).  What only the program (or
# one mode) reaches belongs beside it.
MODES=${LAYERS_MODES-"single=common/train/single dp=dp ddp=ddp"}
if [ -d "$B/common" ]; then
    for o in "$@"; do
        strings -a "$o" | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sed "s#^#$o #"
    done | awk 'NR == FNR { d[$1] = d[$1] " " $2; next }
        ($2 in d) { n = split(d[$2], o, " "); for (i = 1; i <= n; i++) if (o[i] != $1) print $1, o[i] }' \
        "$T/defs" - | sed "s#$B/##g" | sort -u >"$T/named"
    { cat "$T/incs"; cat "$T/pairs" "$T/named"; } >"$T/reach"
    find common -type f -name '*.h' >"$T/modules"
    find "$B/common" -name '*.o' | sed "s#^$B/##" >>"$T/modules"
    awk -v modes="$MODES" "$RULES"'
FILENAME ~ /reach$/ { a = stem($1); b = stem($2); if (a != b) { nx[a]++; next_of[a, nx[a]] = b }; next }
{ m = stem($0); if (m ~ /^common\//) mod[m] = 1 }
function walk(root, k,   q, head, tail, x, i) {
    head = tail = 0
    for (x in node) if (x == root || index(x, root "/") == 1) { q[tail++] = x; got[k, x] = 1 }
    while (head < tail) {
        x = q[head++]
        for (i = 1; i <= nx[x]; i++)
            if (!((k, next_of[x, i]) in got)) { got[k, next_of[x, i]] = 1; q[tail++] = next_of[x, i] }
    }
}
END {
    for (k in nx) node[k] = 1
    for (m in mod) node[m] = 1
    nm = split(modes, w, " ")
    for (i = 1; i <= nm; i++) {
        split(w[i], kv, "=")
        name[i] = kv[1]
        root[i] = kv[2]
        walk(kv[2], i)
    }
    for (m in mod) {
        skip = 0
        for (i = 1; i <= nm; i++) if (m == root[i]) skip = 1
        if (skip) continue
        miss = ""
        have = ""
        for (i = 1; i <= nm; i++)
            if ((i, m) in got) have = have (have ? ", " : "") name[i]
            else miss = miss (miss ? ", " : "") name[i]
        if (miss != "")
            print m ": not reached by " miss " (only " (have ? have : "the program") "): common/ holds what every mode shares; it belongs beside what uses it"
    }
}' "$T/reach" "$T/modules" | sort >"$T/said"
    while IFS= read -r l; do say "$l"; done <"$T/said"
fi

# ---- 5. the fenced steps ---------------------------------------------------------
FENCED=${LAYERS_FENCED-"common/train/single.c dp/dp_step.c ddp/rank.c"}
for f in $FENCED; do
    if [ ! -f "$f" ]; then
        say "$f: no such file (a strategy's step is fenced there)"
        continue
    fi
    awk -v f="$f" '
/\/\/ ---- TRAINING STEP BEGIN/ { begins++; inside = 1; next }
/\/\/ ---- TRAINING STEP END/ { ends++; inside = 0; next }
!inside { next }
/^[ \t]*$/ || /^[ \t]*(\/\*|\*|\/\/)/ { next }
{
    code++
    if ($0 ~ /step_meter_|fault_|graph_|straggle|trace_|story/)
        print f ":" NR ": inside the training step: bookkeeping that belongs around it: " $0
}
END {
    if (begins != 1 || ends != 1)
        print f ": " begins + 0 " TRAINING STEP BEGIN and " ends + 0 " END fences (one of each)"
    else if (code > 40)
        print f ": the training step is " code " lines of code (at most 40)"
}' "$f" >"$T/said"
    while IFS= read -r l; do say "$l"; done <"$T/said"
done

# ---- 6. the files the sources name ---------------------------------------------
# A file a source names ("common/train/graph.c", "measure/disturb.h",
# "rank_setup.c") is a file of the tree or one the build made (a name after a
# move, not before it): a whole path from the top, the end of one, or, for a
# bare name with an underscore (not a field: "cs.c"), a file's own name; the
# system's and other trees' headers (sys/stat.h, mpi.h) aside.
# (what the build made counts: app/twin_body.h, report_page_assets.c)
find common dp ddp app gate bench tests scripts docs "$B" -type f 2>/dev/null | sort >"$T/tree"
find common dp ddp app gate -type f 2>/dev/null | grep -E '\.(c|h|cu|cuh)$' | sort |
    while IFS= read -r f; do
        grep -v '^[ \t]*#[ \t]*include[ \t]*<' "$f" |
            grep -oE '(^|[^A-Za-z0-9_./$-])[a-z_0-9]+(/[A-Za-z_0-9.-]+)*\.(c|h|cu|cuh|py|sh|md)\b' |
            sed -E 's/^[^a-z_0-9]//' | sort -u | sed "s#^#$f #"
    done | awk -v T="$T" -v B="$B" '
BEGIN {
    while ((getline p < (T "/tree")) > 0) {
        have[p] = 1
        n = split(p, w, "/")
        base[w[n]] = 1
        for (i = 1; i < n; i++) dir[w[i]] = 1 # a folder of the tree: its paths are checked
        for (i = 2; i <= n; i++) { s = w[i]; for (k = i + 1; k <= n; k++) s = s "/" w[k]; have[s] = 1 }
    }
}
$2 !~ /\// { if ($2 ~ /_/ && !($2 in base)) print $1 ": names " $2 ", which is no file of the tree"; next }
{
    top = $2; sub(/\/.*/, "", top)
    # another tree'"'"'s (sys/stat.h, OpenBLAS'"'"'s driver/), or made by the build
    if (!(top in dir) || ($2 in have) || (getline x < (B "/" $2)) >= 0) next
    print $1 ": names " $2 ", which is no file of the tree"
}' >"$T/said"
while IFS= read -r l; do say "$l"; done <"$T/said"

if [ "$bad" -gt 0 ]; then
    echo "layers: $bad violation(s)"
    exit 1
fi
echo "layers: $(echo $FLOORS | wc -w) floors; includes and calls run one way, no circle; common/ reached by every mode; $(echo $FENCED | wc -w) fenced steps"
