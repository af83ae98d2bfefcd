#!/bin/sh
# bench/mpi_comm.sh: the all-reduce's bus bandwidth at one size, side by side,
# over the three ways CPU ranks exchange on one host: Open MPI's shared-memory
# transport (mpirun --mca btl vader,self, --comm mpi), Open MPI's TCP
# transport (--mca btl tcp,self, the transport between hosts, here over
# loopback) and ddpbench's own shared-memory collectives (fork, --comm shm).
# Each is a --mode comm run; the three take turns, round after round, so a
# change in the machine's load falls on all of them; the table gives each
# one's median and range over the rounds, out of place and in place.
#
# Usage: sh bench/mpi_comm.sh [-b ddpbench] [-s size] [-n ranks] [-r rounds]
#        defaults: ./ddpbench, 64M, 2 ranks, 3 rounds (about a minute on 2 cores)
set -u
BIN=./ddpbench SIZE=64M NP=2 ROUNDS=3
while getopts b:s:n:r: o; do
    case $o in
    b) BIN=$OPTARG ;;
    s) SIZE=$OPTARG ;;
    n) NP=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    *) echo "usage: sh bench/mpi_comm.sh [-b ddpbench] [-s size] [-n ranks] [-r rounds]" >&2; exit 2 ;;
    esac
done
command -v mpirun >/dev/null || { echo "bench/mpi_comm.sh: mpirun is not installed (scripts/deps.sh)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
C="--mode comm --backend cpu -b $SIZE -e $SIZE --coll all-reduce -n 5 -w 2 --json"
MPIRUN="mpirun --allow-run-as-root --oversubscribe -q -np $NP"
GPUS=$(seq -s, 0 $((NP - 1)))
echo "bench/mpi_comm.sh: all-reduce of $SIZE on $NP ranks, $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
    $MPIRUN --mca btl vader,self "$BIN" $C --comm mpi >"$T/mpi-shm.$r" 2>"$T/err" || { cat "$T/err"; exit 1; }
    $MPIRUN --mca btl tcp,self "$BIN" $C --comm mpi >"$T/mpi-tcp.$r" 2>"$T/err" || { cat "$T/err"; exit 1; }
    "$BIN" $C --gpus "$GPUS" --comm shm >"$T/shm.$r" 2>"$T/err" || { cat "$T/err"; exit 1; }
done
python3 - "$T" "$ROUNDS" <<'EOF'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
rows = (("mpi-shm", "MPI, shared memory (btl vader)"), ("mpi-tcp", "MPI, TCP (btl tcp, loopback)"),
        ("shm", "ddpbench shm (fork, --comm shm)"))
print("%-34s %25s %25s" % ("", "busbw out of place (GB/s)", "busbw in place (GB/s)"))
print("%-34s %12s %12s %12s %12s" % ("transport", "median", "range", "median", "range"))
for key, name in rows:
    got = {"out_of_place": [], "in_place": []}
    for r in range(1, rounds + 1):
        o = json.load(open("%s/%s.%d" % (d, key, r)))
        p = o["collectives"][0]["points"][0]
        assert o["wrong_total"] == 0, key
        for k in got:
            got[k].append(p[k]["busbw_gbs"])
    cells = []
    for k in ("out_of_place", "in_place"):
        v = got[k]
        cells += ["%.2f" % statistics.median(v), "%.2f-%.2f" % (min(v), max(v))]
    print("%-34s %12s %12s %12s %12s" % (name, *cells))
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
