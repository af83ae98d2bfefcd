#!/bin/sh
# tests/e2e/e2e_mpi_netns.sh: DDP across two "hosts" on one machine: two
# network namespaces joined by a veth pair (scripts/netns_hosts.sh), mpirun
# in one starting ranks in both over Open MPI's TCP transport, as between
# real hosts:
#  - 2 ranks (one per host) and 4 (two per host, local ranks 0 and 1): the
#    final parameters equal fork-mode DDP's and single mode's to 1e-5, and
#    the report names each rank's host;
#  - the veth shaped to 1 Gbit/s (tc tbf): the all-reduce's bus bandwidth
#    is held under that rate (the ranks' traffic crosses the veth), no
#    DDP step is shorter than its gradients take through the link, and
#    compare --predict's alpha-beta step is printed against the measured
#    one.
# Where namespaces cannot be made (not root) it says so and skips.
# Usage: sh tests/e2e/e2e_mpi_netns.sh ./ddpbench
E2E=e2e_mpi_netns
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../scripts/netns_hosts.sh"
e2e_on_exit() {
    for p in $(leftovers); do kill -KILL "$p" 2>/dev/null; done
    netns_down
}
# the tools are installed by make test-e2e (scripts/deps.sh test): missing, a failure
for t in mpirun ip tc unshare python3; do
    need $t || { e2e_finish; exit; }
done
if ! why=$(netns_can); then
    echo "$E2E: SKIPPED: two hosts cannot be made on this machine: $why"
    exit 0
fi
export DDPBENCH_E2E_TAG=$TAG
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
netns_up "$T" || { ko "the namespaces could not be made"; e2e_finish; exit; }

RUN="--mode ddp --backend cpu --layers 16,32,24,5 --act gelu --loss ce --optim adamw --lr 0.01 \
    --samples 500 --batch 100 --steps 8"
for np in 2 4; do
    per=$((np / 2))
    gpus=$(seq -s, 0 $((np - 1)))
    "$BIN" $RUN --quiet --mode single --sampler-replicas $np --save "$T/single$np.st" >/dev/null 2>"$T/err" ||
        ko "single ($np replicas): $(cat "$T/err")"
    "$BIN" $RUN --quiet --gpus "$gpus" --save "$T/fork$np.st" >/dev/null 2>"$T/err" ||
        ko "fork ddp on $gpus: $(cat "$T/err")"
    if ! netns_mpirun --hostfile "$T/hosts$per" -np $np "$BIN" $RUN --comm mpi --json \
        --save "$T/mpi$np.st" >"$T/json" 2>"$T/err"; then
        ko "mpirun -np $np on two hosts: $(cat "$T/err")"
        continue
    fi
    if [ $per = 1 ]; then want="2 ranks on 2 hosts (hosta: rank 0, hostb: rank 1)"; else
        want="4 ranks on 2 hosts (hosta: ranks 0-1, hostb: ranks 2-3)"; fi
    grep -qF "launched by mpirun: $want" "$T/err" && ok || ko "-np $np: the banner: $(head -8 "$T/err")"
    python3 - "$T/json" $per <<'EOF' && ok || ko "-np $np: --json's devices: $(head -c 600 "$T/json")"
import json, sys
o, per = json.load(open(sys.argv[1])), int(sys.argv[2])
names = [d["name"] for d in o["devices"]]
assert len(names) == 2 * per, names
# rank r on hosta for r < per, else hostb; each host's device per local rank
for r, n in enumerate(names):
    assert n.endswith("host " + ("hosta" if r < per else "hostb") + ")"), names
assert [d["id"] for d in o["devices"]] == [r % per for r in range(2 * per)], o["devices"]
EOF
    d1=$(st_close "$T/mpi$np.st" "$T/fork$np.st") && ok || ko "-np $np on two hosts vs fork ddp: distance $d1"
    d2=$(st_close "$T/mpi$np.st" "$T/single$np.st") && ok || ko "-np $np on two hosts vs single: distance $d2"
    echo "$E2E: -np $np on two hosts ($per per host): vs fork ddp $d1, vs single $d2"
done

# ---------------------------------------------------------------------------
# a network of 1 Gbit/s (0.125 GB/s): the all-reduce cannot beat it
netns_rate 1gbit || ko "tc tbf on the veth failed"
if netns_mpirun --hostfile "$T/hosts1" -np 2 "$BIN" --mode comm --backend cpu -b 4M -e 4M \
    --coll all-reduce,broadcast -n 4 -w 1 --json >"$T/comm" 2>"$T/err"; then
    set -- $(python3 -c 'import json,sys
c = {x["name"]: x["points"][0] for x in json.load(open(sys.argv[1]))["collectives"]}
ar, bc = c["all-reduce"], c["broadcast"]
print(ar["out_of_place"]["busbw_gbs"], min(ar[p]["time_s"] / bc[p]["time_s"] for p in ("out_of_place", "in_place")))' \
        "$T/comm")
    bw=$1 ratio=$2
    # 2 ranks: busbw = algbw, every byte crosses the link once each way
    awk -v b="$bw" 'BEGIN { exit !(b > 0 && b <= 0.125 * 1.15) }' && ok ||
        ko "1 Gbit/s link: all-reduce busbw $bw GB/s, above the link's 0.125"
    # and near it: Open MPI's default for 2 ranks (a binomial reduce, then a
    # broadcast) crosses the link twice in turn; the ring ddpbench asks for
    # crosses it once each way at once.  Judged against a broadcast of the
    # same bytes on the same link in the same run (one crossing), not
    # against the link's rate: a busy machine slows both (an all-reduce's
    # busbw alone, 0.11 GB/s quiet, fell to 0.084 at load 8, under the old
    # 0.085 bound).  The all-reduce takes the broadcast's time 1.0 to 1.1
    # times quiet, up to 1.42 at load 6 under taskset -c 0; the binomial
    # 1.95 to 2.0 quiet, 1.84 at the least loaded: the bound is 1.5, the
    # better of the out-of-place and in-place rounds.
    awk -v r="$ratio" 'BEGIN { exit !(r > 0 && r < 1.5) }' && ok ||
        ko "1 Gbit/s link: the all-reduce took $ratio times a broadcast's time: not the ring (OMPI_MCA_coll_libnbc_iallreduce_algorithm)"
    echo "$E2E: 4 MiB all-reduce over the 1 Gbit/s veth: busbw $(printf %.3f "$bw") GB/s (the link: 0.125), $(printf %.2f "$ratio") times a broadcast's time"
else
    ko "--mode comm on the shaped link: $(cat "$T/err")"
fi

# DDP's step on the shaped link, and --predict's model (single's phases +
# the all-reduce measured on this link) against it.  What is judged is a
# floor no load can break: each step moves every gradient byte across the
# link each way (2 ranks: a ring's reduce-scatter and all-gather, or a
# reduce and a broadcast: G bytes either way), and tbf lets through at most
# its bucket (1 ms at the rate: 125000 bytes) plus the rate times the
# step's length, so no step of the shaped run can be shorter than
# (G - bucket) / rate: 8.6 ms for mlp-small's 1204264 gradient bytes at
# 1 Gbit/s.  A busy machine only lengthens a step.  A run whose traffic
# did not cross the shaped link is under it on a quiet machine (the
# unshaped run's shortest step: 4 to 6 ms).  (Comparing the two runs' mean
# steps was a guess: at load 8 the unshaped run's was 17.1 ms, the shaped
# one's 16.2.)
CMP="--mode compare --backend cpu --model mlp-small --samples 2048 --steps 24 --predict --json"
for rate in 1gbit none; do
    netns_rate $rate
    if netns_mpirun --hostfile "$T/hosts1" -np 2 "$BIN" $CMP >"$T/cmp-$rate" 2>"$T/err"; then ok; else
        ko "compare --predict on the $rate link: $(cat "$T/err")"; fi
done
python3 - "$T/cmp-1gbit" "$T/cmp-none" 125000000 125000 <<'EOF' && ok ||
import json, sys
def ddp(path):  # compare --json: one object per mode; DDP's, with --predict's rows
    o = [json.loads(l) for l in open(path) if l.strip()]
    d = [x for x in o if x["config"]["mode"] == "ddp"][0]
    row = [r for r in d["predict"]["rows"] if r["devices"] == 2][0]
    return d, row["ddp_step_s"], d["predict"]["all_reduce"]
rate, bucket = float(sys.argv[3]), float(sys.argv[4])
for path, name in ((sys.argv[1], "1 Gbit/s"), (sys.argv[2], "unshaped")):
    d, pred, ar = ddp(path)
    meas = d["step_time_s"]["mean"]
    print("e2e_mpi_netns: %-8s link: ddp step measured %.3f ms (the shortest %.3f), predicted %.3f ms "
          "(measured/predicted %.2f; all-reduce %.0f us + bytes / %.3f GB/s)" % (name, meas * 1e3,
          d["step_time_s"]["min"] * 1e3, pred * 1e3, meas / pred, ar["alpha_s"] * 1e6,
          1e-9 / ar["beta_s_per_byte"]))
d = ddp(sys.argv[1])[0]
g = d["devices"][0]["mem_peak_split"]["grads"]
low = (g - bucket) / rate
print("e2e_mpi_netns: the floor of a step on the 1 Gbit/s link: %d gradient bytes less the bucket "
      "at the rate, %.3f ms" % (g, low * 1e3))
assert g > 1e6 and d["step_time_s"]["min"] >= low, (g, d["step_time_s"]["min"], low)
EOF
    ko "compare --predict on two hosts: a DDP step on the 1 Gbit/s link was shorter than its gradients take through it"

e2e_finish
