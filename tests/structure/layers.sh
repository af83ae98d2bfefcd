#!/bin/sh
# tests/structure/layers.sh: the floors of common/ hold (see common/README.md).
#
#   sh tests/structure/layers.sh [BUILD_DIR [ROOT]]
#
# BUILD_DIR holds the objects (default build/release), ROOT the tree (default
# this repository; tests/structure/layers_selftest.sh points it at a small
# planted tree to prove each check can fail).
#
# Each floor's README.md ends with "May include: a/, b/": the floors below it
# that it stands on.  The check reads those lines and then proves:
# 1. the floors' own graph has no circle (tsort), and every folder of common/
#    is a floor with such a README;
# 2. includes: a file includes only its own floor and the floors it may
#    include, always by folder ("device/backend.h"); an _impl.h only from its
#    own floor (the implementers); common/ never includes strategies/, app/
#    or bench/; the strategies (strategies/single, dp, ddp) stand on all of
#    common/ and their seam strategies/strategy.h but never use each other;
#    app/ (the program) stands on all of those, never on bench/;
# 3. calls, read from the objects with nm: the same rule for every call from
#    one object into another, and no objects call each other in a circle.
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
for d in common/*/; do
    f=$(basename "$d")
    FLOORS="$FLOORS $f"
    if [ ! -s "$d/README.md" ]; then
        say "common/$f: no README.md saying what it owns and may include"
        continue
    fi
    may=$(sed -n 's/^May include: *//p' "$d/README.md" | tr -d '/,.' | sed 's/nothing.*//')
    [ -n "$(grep '^May include:' "$d/README.md")" ] ||
        say "common/$f/README.md: no 'May include:' line"
    echo "$may" >"$T/may.$f"
    for g in $may; do
        [ -d "common/$g" ] || say "common/$f/README.md: may include $g/, which is not a floor"
        echo "$g $f" >>"$T/floors" # g stands below f
    done
done
for f in $FLOORS; do echo "$f $f"; done >>"$T/floors"
tsort "$T/floors" >/dev/null 2>"$T/loop" ||
    say "the floors' READMEs make a circle: $(grep -v 'contains a loop' "$T/loop" | sed 's/^tsort: //' | tr '\n' ' ')"
for f in common/*.c common/*.h common/*.cu; do
    [ -e "$f" ] && say "$f: a file outside the floors"
done

# floor_of PATH: the floor of a file or object under common/; a strategy's
# folder under strategies/ (single, dp, ddp), "seam" for strategies/ itself;
# else its top folder (app, bench)
floor_of() {
    case "$1" in
    common/*/*)
        f=${1#common/}
        echo "${f%%/*}" ;;
    strategies/*/*)
        f=${1#strategies/}
        echo "${f%%/*}" ;;
    strategies/*) echo seam ;;
    *) echo "${1%%/*}" ;;
    esac
}

# may FROM TO: may a file of FROM use TO?  (floors, the strategies and their
# seam, app, bench)
STRATS=$(cd strategies 2>/dev/null && ls -d */ 2>/dev/null | tr -d / | tr '\n' ' ')
is_strategy() {
    for s in $STRATS; do [ "$s" = "$1" ] && return 0; done
    return 1
}
may() {
    [ "$1" = "$2" ] && return 0
    case "$1" in
    app)
        [ "$2" = bench ] && return 1
        return 0 ;;
    bench) return 0 ;;
    seam)
        is_strategy "$2" && return 1
        case "$2" in app | bench) return 1 ;; esac
        return 0 ;;
    esac
    if is_strategy "$1"; then
        is_strategy "$2" && return 1
        case "$2" in app | bench) return 1 ;; esac
        return 0
    fi
    [ -f "$T/may.$1" ] || return 1
    for g in $(cat "$T/may.$1"); do
        [ "$g" = "$2" ] && return 0
    done
    return 1
}

# ---- 2. includes ----------------------------------------------------------------
for f in $(find common strategies app -type f 2>/dev/null | grep -E '\.(c|h|cu|cuh)$' | sort); do
    me=$(floor_of "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" >"$T/inc"
    while read -r h; do
        case "$h" in
        */*) ;;
        *)
            say "$f: includes \"$h\" without its folder"
            continue ;;
        esac
        case "$h" in
        app/* | bench/* | strategies/*) path=$h ;;
        *)
            path=common/$h
            [ -e "$path" ] || path=strategies/$h ;;
        esac
        # a header made by the build (app/twin_body.h) is in the build folder
        [ -e "$path" ] || [ -e "$B/$h" ] || { say "$f: includes \"$h\", which does not exist"; continue; }
        [ -e "$path" ] || continue
        his=$(floor_of "$path")
        may "$me" "$his" || say "$f: includes $h, but $me/ may not include $his/"
        case "$h" in
        *_impl.h) [ "$me" = "$his" ] || say "$f: includes $h, which only $his/'s implementers may" ;;
        esac
    done <"$T/inc"
done

# ---- 3. calls between objects -----------------------------------------------------
if [ ! -d "$B/common" ]; then
    say "$B/common: no objects (build first: make)"
else
    objs=$(find "$B/common" "$B/strategies" "$B/app" -name '*.o' 2>/dev/null | sort)
    for o in $objs; do
        nm -g --defined-only "$o" | awk -v o="$o" 'NF == 3 && $2 ~ /[TDBRCVW]/ { print $3, o }'
    done | sort -u >"$T/defs"
    for o in $objs; do
        nm -u "$o" | awk -v o="$o" '{ print o, $NF }'
    done >"$T/undefs"
    awk 'NR == FNR { d[$1] = $2; next } ($2 in d) && d[$2] != $1 { print $1, d[$2], $2 }' \
        "$T/defs" "$T/undefs" | sed "s#$B/##g" | sort -u >"$T/edges"
    [ -s "$T/edges" ] || say "$B: no calls between objects found (is nm installed?)"
    while read -r from to sym; do
        a=$(floor_of "$from")
        b=$(floor_of "$to")
        may "$a" "$b" || say "$from calls $sym in $to, but $a/ may not use $b/"
    done <"$T/edges"
    awk '{ print $1, $2 }' "$T/edges" | sort -u >"$T/pairs"
    tsort "$T/pairs" >/dev/null 2>"$T/loop" ||
        say "objects call each other in a circle: $(grep -v 'contains a loop' "$T/loop" | sed 's/^tsort: //' | tr '\n' ' ')"
fi

if [ "$bad" -gt 0 ]; then
    echo "layers: $bad violation(s)"
    exit 1
fi
echo "layers: $(echo $FLOORS | wc -w) floors; includes and calls run one way, no circle"
