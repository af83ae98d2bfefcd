#!/bin/sh
# scripts/timed.sh: make test's suites, each timed, and the table of them at
# the end, so a slow suite is visible.
#
#   sh scripts/timed.sh NAME CMD [ARGS...]   print "== NAME", run CMD, add its
#                                            line (name, seconds, result) to
#                                            the table; its exit status (on a
#                                            failure, the table so far first)
#   sh scripts/timed.sh --add NAME T0 RC     add a line for a suite run
#                                            elsewhere since T0 (date +%s.%N)
#                                            with exit status RC
#   sh scripts/timed.sh --table [T0]         print the table and the sum of
#                                            its seconds (and, with T0, the
#                                            wall time since T0, builds and
#                                            all)
#   sh scripts/timed.sh --reset              start a new table
#
# The table is $TEST_TIMES (build/test-times.txt): one line a suite, tab
# separated, in the order they ran.
set -u
F=${TEST_TIMES:-build/test-times.txt}

table() {
    [ -f "$F" ] || return 0
    awk -F '\t' -v t0="${1:-}" -v now="$(date +%s.%N)" '
        { name[NR] = $1; secs[NR] = $2; res[NR] = $3; sum += $2; if (length($1) > w) w = length($1) }
        END {
            if (w < 20) w = 20
            print ""
            print "make test: the suites, in the order they ran"
            printf "  %-*s %8s  %s\n", w, "suite", "seconds", "result"
            for (i = 1; i <= NR; i++)
                printf "  %-*s %8.1f  %s\n", w, name[i], secs[i], res[i]
            printf "  %-*s %8.1f  (%d suites)\n", w, "sum", sum, NR
            # the slowest three, by name
            for (k = 1; k <= 3 && k <= NR; k++) {
                best = 0
                for (i = 1; i <= NR; i++)
                    if (!(i in shown) && (best == 0 || secs[i] > secs[best]))
                        best = i
                shown[best] = 1
                line = line (k > 1 ? ", " : "") name[best] " " sprintf("%.0f s", secs[best])
            }
            if (NR)
                print "  slowest: " line
            if (t0 != "")
                printf "  make test took %.0f s in all (builds and installs included)\n", now - t0
        }' "$F"
}

add() { # NAME SECONDS RC
    mkdir -p "$(dirname "$F")"
    if [ "$3" = 0 ]; then r=passed; else r="FAILED (exit $3)"; fi
    printf '%s\t%s\t%s\n' "$1" "$2" "$r" >>"$F"
}

since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

case ${1:-} in
--reset)
    mkdir -p "$(dirname "$F")" && : >"$F"
    ;;
--table)
    table "${2:-}"
    ;;
--add)
    add "$2" "$(since "$3")" "$4"
    [ "$4" = 0 ] || table
    exit "$4"
    ;;
*)
    name=$1
    shift
    echo "== $name"
    t0=$(date +%s.%N)
    "$@"
    rc=$?
    add "$name" "$(since "$t0")" $rc
    [ $rc = 0 ] || table
    exit $rc
    ;;
esac
