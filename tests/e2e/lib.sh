# tests/e2e/lib.sh: the harness every end-to-end script sources, after naming
# itself:
#
#     E2E=e2e_cli
#     . "$(dirname "$0")/lib.sh"
#
# It gives the script
#   BIN              the binary under test (the script's first argument)
#   T                a temporary folder, removed on exit
#   e2e_on_exit      a hook the script may redefine; runs first on exit
#   ok / ko WHY      count a check that passed / failed (ko prints FAIL: WHY)
#   expect_error WORDS ARGS...
#                    ddpbench ARGS must exit 2 with one stderr line
#                    "ddpbench: error: ..." holding WORDS and nothing on stdout
#   TAG, leftovers   a tag to start ddpbench with (DDPBENCH_E2E_TAG=$TAG), and
#                    the live processes that carry it (a fault test's orphans)
#   lingering        the leftovers still alive after up to 10 s
#   catching PID SIG true once process PID has its handler for signal
#                    number SIG (waits up to 20 s): a signal sent then is
#                    its to take, not the default action's
#   shm_list         ddpbench's entries in /dev/shm (there should be none)
#   shm_new B A      the new ones in list A that may be ours (not a live stranger's)
#   need TOOL        true when TOOL is there; else a failed check (make
#                    test-e2e installs every tool, so none is skipped)
#   mknpy FILE DESCR SHAPE FORTRAN DATAFILE
#                    a .npy file: header {'descr': DESCR, 'fortran_order':
#                    FORTRAN, 'shape': SHAPE} padded like numpy's, then DATAFILE
#   st_dist A B      the relative L2 distance of two .safetensors files'
#                    parameters, printed
#   st_close A B     the same to 2 digits; true when at most 1e-5
#   e2e_finish       the summary line; the script's status (1 when any failed)
# Run as: sh tests/e2e/e2e_NAME.sh ./ddpbench
set -u
BIN=${1:-./ddpbench}
T=$(mktemp -d)
pass=0
fails=0
e2e_on_exit() { :; }
e2e_exit() {
    e2e_on_exit
    rm -rf "$T"
}
trap e2e_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ok() { pass=$((pass + 1)); }
ko() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

TAG="$E2E-$$"

# Live (non-zombie) processes started with DDPBENCH_E2E_TAG=$TAG in their
# environment.  Zombies are dead; init reaps them in its own time.  One grep
# reads every environment (NUL-separated entries: -z, a whole entry: -x):
# a tr and a grep for each process took 4 s at load 4, and the fault tests
# call this after every run.  The grep names itself: /proc/[0-9]* is expanded
# by the process that then becomes grep, with the tag when the script exports
# it.  So grep ends, and is reaped, before any process is looked at: read
# while grep still ran (a pipe), its own entry was live on a busy machine,
# one call in 7 with nothing else left ("processes left behind: 8347").
leftovers() {
    for f in $(grep -lzx "DDPBENCH_E2E_TAG=$TAG" /proc/[0-9]*/environ 2>/dev/null); do
        d=${f%/environ}
        st=$(awk '/^State:/ { print $2 }' "$d/status" 2>/dev/null)
        [ -n "$st" ] && [ "$st" != Z ] && echo "${d#/proc/}"
    done
}

# catching PID SIG: wait up to 20 s for process PID to catch signal number
# SIG (bit SIG-1 of SigCgt in /proc/PID/status).  A test that signals a run
# it just started waits for this instead of sleeping a guess: a slow start
# on a busy machine then delays the signal rather than letting the default
# action take it.  The bit is read from its own hex digit: the whole mask
# is 64 bits, and the shell's arithmetic saturates a mask with bit 63 set
# (a caught signal 64) to all ones.
catching() {
    i=0
    while [ $i -lt 200 ]; do
        d=$(awk -v b=$(($2 - 1)) '/^State:/ && $2 == "Z" { print "Z"; exit }
            /^SigCgt:/ { print substr($2, length($2) - int(b / 4), 1) }' "/proc/$1/status" 2>/dev/null)
        case $d in
        '' | Z) return 1 ;; # gone, or dead and not yet reaped
        esac
        [ $(((0x$d >> (($2 - 1) % 4)) & 1)) = 1 ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# lingering: the leftovers still alive after waiting up to 10 s for them to
# end.  A dying rank takes its time on a busy machine; one left behind for
# good (still training, still waiting) is there after 10 s too.
lingering() {
    i=0
    while [ -n "$(leftovers)" ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    leftovers
}

# ddpbench's own names: /ddpbench-PID-16 hex digits (comm_seg.c); /dev/shm is shared, and
# other programs' entries (even ones named ddpbench-something) are not ours
shm_list() { ls /dev/shm 2>/dev/null | grep -E '^ddpbench-[0-9]+-[0-9a-f]{16}$' | sort; }
# shm_new BEFORE AFTER: the entries in AFTER, not in BEFORE, that may be ours:
# one named after a live process not started with our tag belongs to another
# ddpbench running meanwhile (another test suite on a shared machine)
shm_new() {
    comm -13 "$1" "$2" | while read -r e; do
        pid=${e#ddpbench-}
        pid=${pid%%-*}
        if [ -d "/proc/$pid" ] &&
            ! { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "DDPBENCH_E2E_TAG=$TAG"; then
            continue
        fi
        echo "$e"
    done
}

need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    ko "$1 is not installed (scripts/deps.sh test installs it; make test-e2e runs it)"
    return 1
}

mknpy() {
    hdr="{'descr': '$2', 'fortran_order': $4, 'shape': $3, }"
    # pad so magic(6)+version(2)+len(2)+header+newline is a multiple of 64
    len=$(( ${#hdr} + 1 ))
    pad=$(( (64 - (10 + len) % 64) % 64 ))
    total=$(( len + pad ))
    {
        printf '\223NUMPY\001\000'
        printf "\\$(printf '%03o' $((total % 256)))\\$(printf '%03o' $((total / 256)))"
        printf '%s' "$hdr"
        printf "%${pad}s" ""
        printf '\n'
        cat "$5"
    } >"$1"
}


# st_dist A B: the relative L2 distance of two .safetensors files' parameters
# (every tensor, by name, float32), printed
st_dist() {
    python3 - "$1" "$2" <<'EOF'
import array, json, math, struct, sys
def read(path):
    b = open(path, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    head = json.loads(b[8:8 + n])
    head.pop("__metadata__", None)
    data = b[8 + n:]
    out = {}
    for k, t in head.items():
        assert t["dtype"] == "F32", k
        out[k] = array.array("f", data[t["data_offsets"][0]:t["data_offsets"][1]])
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
diff = norm = 0.0
for k in a:
    assert len(a[k]) == len(b[k]), k
    for x, y in zip(a[k], b[k]):
        diff += (x - y) ** 2
        norm += y * y
print("%.6g" % (math.sqrt(diff) / max(math.sqrt(norm), 1e-30)))
EOF
}

# st_close A B: st_dist, printed to 2 digits; true when at most 1e-5
st_close() {
    d=$(st_dist "$1" "$2") || return 1
    awk -v d="$d" 'BEGIN { printf "%.1e\n", d; exit !(d <= 1e-5) }'
}

expect_error() {
    words=$1
    shift
    "$BIN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -ne 2 ]; then ko "$*: exit $rc, expected 2 ($(cat "$T/err"))"; return; fi
    if [ "$(wc -l <"$T/err")" -ne 1 ]; then ko "$*: stderr is not one line: $(cat "$T/err")"; return; fi
    if ! grep -q "^ddpbench: error: " "$T/err"; then ko "$*: no prefix: $(cat "$T/err")"; return; fi
    if ! grep -qF -- "$words" "$T/err"; then ko "$*: '$words' not in: $(cat "$T/err")"; return; fi
    if [ -s "$T/out" ]; then ko "$*: wrote to stdout: $(head -2 "$T/out")"; return; fi
    ok
}

e2e_finish() {
    echo "$E2E: $pass passed, $fails failed"
    [ "$fails" -eq 0 ]
}
