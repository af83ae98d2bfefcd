#!/bin/sh
# tests/layers.sh: the floors of common/ hold (see common/README.md).
#
#   sh tests/layers.sh [BUILD_DIR]        (default build/release)
#
# 1. common/ holds exactly the floors below, each with its README.md.
# 2. Includes: a file of floor F includes only headers of floors at or below F,
#    always by folder ("device/backend.h"); an _impl.h only from its own floor
#    (the implementers); common/ never includes dp/, ddp/ or bench/; dp/ and
#    ddp/ never include each other.
# 3. Calls, read from the objects with nm: an object calls only into objects
#    of its own floor or below (dp/ and ddp/ stand above common/), and no
#    objects call each other in a circle (tsort finds any loop).
# Exit 0 when all hold; otherwise one line per violation and exit 1.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${1:-build/release}
FLOORS="base device comm nn config data io measure train report"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bad=0
say() { echo "layers: $*"; bad=$((bad + 1)); }

# The rank of a path's layer: its floor's place in FLOORS (0-based), 20 for
# dp/ and ddp/, 30 for bench/, -1 for what is none of these.
rank_of() {
    case "$1" in
    common/*/*)
        f=${1#common/}
        f=${f%%/*}
        i=0
        for x in $FLOORS; do
            [ "$x" = "$f" ] && { echo $i; return; }
            i=$((i + 1))
        done
        echo -1 ;;
    dp/* | ddp/*) echo 20 ;;
    bench/*) echo 30 ;;
    *) echo -1 ;;
    esac
}

# ---- 1. the folders -----------------------------------------------------------
for d in common/*/; do
    d=${d%/}
    [ "$(rank_of "$d/x")" -ge 0 ] || say "$d: not a floor (the floors: $FLOORS)"
done
for f in $FLOORS; do
    [ -d "common/$f" ] || say "common/$f: missing"
    [ -s "common/$f/README.md" ] || say "common/$f: no README.md saying what it owns and may include"
done
ls common/*.c common/*.h common/*.cu 2>/dev/null | while read -r f; do
    echo "layers: $f: a file outside the floors"
done | grep . && bad=$((bad + 1))

# ---- 2. includes ----------------------------------------------------------------
for f in $(git ls-files 'common/*' 'dp/*' 'ddp/*' | grep -E '\.(c|h|cu|cuh)$'); do
    me=$(rank_of "$f")
    floor=${f#common/}
    floor=${floor%%/*}
    top=${f%%/*}
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" >"$T/inc"
    while read -r h; do
        case "$h" in
        */*) ;;
        *) say "$f: includes \"$h\" without its folder"; continue ;;
        esac
        case "$h" in
        dp/* | ddp/* | bench/*) path=$h ;;
        *) path=common/$h ;;
        esac
        [ -e "$path" ] || { say "$f: includes \"$h\", which does not exist"; continue; }
        his=$(rank_of "$path")
        if [ "$his" -gt "$me" ]; then
            say "$f: includes $h, a floor above its own"
        elif [ "$top" != common ] && [ "${h%%/*}" != "$top" ] && [ "$his" -eq 20 ]; then
            say "$f: includes $h (dp/ and ddp/ stand side by side)"
        fi
        case "$h" in
        *_impl.h)
            [ "$top" = common ] && [ "${h%%/*}" = "$floor" ] ||
                say "$f: includes $h, which only its own floor's implementers may" ;;
        esac
    done <"$T/inc"
done

# ---- 3. calls between objects -----------------------------------------------------
if [ ! -d "$B/common" ]; then
    say "$B/common: no objects (build first: make)"
else
    objs=$(find "$B/common" "$B/dp" "$B/ddp" -name '*.o' 2>/dev/null | sort)
    for o in $objs; do
        nm -g --defined-only "$o" | awk -v o="$o" 'NF == 3 && $2 ~ /[TDBRCVW]/ { print $3, o }'
    done | sort -u >"$T/defs"
    for o in $objs; do
        nm -u "$o" | awk -v o="$o" '{ print o, $NF }'
    done >"$T/undefs"
    awk 'NR == FNR { d[$1] = $2; next } ($2 in d) && d[$2] != $1 { print $1, d[$2], $2 }' \
        "$T/defs" "$T/undefs" | sort -u >"$T/edges"
    [ -s "$T/edges" ] || say "$B: no calls between objects found (nm missing?)"
    while read -r from to sym; do
        a=$(rank_of "${from#"$B"/}")
        b=$(rank_of "${to#"$B"/}")
        f=${from#"$B"/}
        t=${to#"$B"/}
        if [ "$b" -gt "$a" ]; then
            say "$f calls $sym in $t, a floor above its own"
        elif [ "$a" -eq 20 ] && [ "$b" -eq 20 ] && [ "${f%%/*}" != "${t%%/*}" ]; then
            say "$f calls $sym in $t (dp/ and ddp/ stand side by side)"
        fi
    done <"$T/edges"
    awk '{ print $1, $2 }' "$T/edges" | sort -u >"$T/pairs"
    if ! tsort "$T/pairs" >/dev/null 2>"$T/loop"; then
        say "objects call each other in a circle: $(grep -v 'input contains a loop' "$T/loop" |
            sed 's/^tsort: //; s#'"$B"'/##' | tr '\n' ' ')"
    fi
fi

if [ "$bad" -gt 0 ]; then
    echo "layers: $bad violation(s)"
    exit 1
fi
echo "layers: $(echo $FLOORS | wc -w) floors, includes and calls run one way, no circle"
