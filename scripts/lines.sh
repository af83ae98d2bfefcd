#!/bin/sh
# scripts/lines.sh: the production lines as the house issues count them
# (every .c .h .cu .cuh .cpp .hpp outside tests/, `wc -l`), then per top-level
# folder and per common/ subfolder, and the comment, blank and code lines.
# usage: scripts/lines.sh [TREE]   (a checkout; default: this one)
set -eu
cd "${1:-.}"
src() { find "$@" \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
    -o -name '*.cpp' -o -name '*.hpp' \) -type f 2>/dev/null; }
count() { src "$@" | xargs cat 2>/dev/null | wc -l; }
printf 'production lines: %s\n' "$(src . | grep -v -e '^\./tests/' -e '^\./build/' -e '^\./\.git/' |
    xargs cat | wc -l)"
for d in app common ddp dp gate bench; do printf '%s %s  ' $d "$(count $d)"; done; echo
for d in common/*/; do printf '%s %s  ' "$(basename $d)" "$(count $d)"; done; echo
# comment lines: inside /* */ or starting with //; blank: nothing but spaces
src . | grep -v -e '^\./tests/' -e '^\./build/' -e '^\./\.git/' | xargs awk '
    FNR == 1 { inc = 0 }
    { t = $0; gsub(/^[ \t]+|[ \t]+$/, "", t) }
    inc { c++; if (index(t, "*/")) inc = 0; next }
    t == "" { b++; next }
    substr(t, 1, 2) == "/*" { c++; if (!index(t, "*/")) inc = 1; next }
    substr(t, 1, 2) == "//" { c++ }
    END { printf "comment %d  blank %d  code %d\n", c, b, NR - c - b }'
