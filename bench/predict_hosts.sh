#!/bin/sh
# bench/predict_hosts.sh: DDP's step at 16, 64 and 256 ranks, by the
# alpha-beta model of --predict (app/predict/predict.h) carried past one
# host: an all-reduce of each bucket over K ranks, K = hosts x ranks per
# host, costs 2(K-1) alpha + 2(K-1)/K x bytes / B as a ring, or
# 2 log2(K) alpha + 2 x bytes / B as NCCL's double binary tree (the shorter
# of the two, as NCCL picks), where B is the ring's
# slowest link (inside a host, or the host's network when the ring crosses
# hosts; every ring crosses each host's boundary once each way, so the host's
# network bandwidth is shared by all of its GPUs' rings); DDP hides what
# backward outlasts, except the last bucket's all-reduce:
#   exposed = max(all-reduce - backward, all-reduce / buckets)
#   step    = compute (per rank, the same rows per rank at every K) + exposed
#   scaling efficiency = compute / step
#
# Two cases:
#  - measured here: CPU ranks, one per host, on a 1 Gbit/s network: single's
#    phases of mlp-small at the per-rank batch and the all-reduce's alpha and
#    beta, measured by ddpbench --mode compare --predict under mpirun between
#    two network namespaces joined by a tbf-shaped veth (scripts/netns_hosts.sh;
#    needs root, else this case is skipped with the reason);
#  - published specifications, not measured here: 8 H100 SXM per host,
#    NVLink 4 inside (450 GB/s each way per GPU), and between hosts either
#    8 x 400 Gbit/s InfiniBand NDR (400 GB/s per host) or 1 x 100 Gbit/s
#    Ethernet (12.5 GB/s per host); mlp-large (201 M parameters, fp32
#    gradients) at --batch-per-device 2048, compute at the H100's published
#    fp32 peak (67 TFLOP/s: a lower bound on the step, which makes the
#    network's share an upper bound), alpha 5 us per hop (an assumption).
#
# Usage: sh bench/predict_hosts.sh [ddpbench]
set -u
BIN=${1:-./ddpbench}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
. "$HERE/../scripts/netns_hosts.sh"
trap 'netns_down; rm -rf "$T"' EXIT
echo "bench/predict_hosts.sh: load average $(cut -d' ' -f1-3 /proc/loadavg)"
JSON=
if why=$(netns_can); then
    netns_up "$T" && netns_rate 1gbit || { echo "the namespaces could not be made"; exit 1; }
    # per rank 128 rows (--batch-per-device), 40 steps; single runs the same
    # 128 rows a rank computes when given --batch 128
    netns_mpirun --hostfile "$T/hosts1" -np 2 "$BIN" --mode compare --backend cpu --model mlp-small \
        --batch 256 --samples 4096 --steps 40 --predict --json >"$T/cmp.json" 2>"$T/err" ||
        { cat "$T/err"; exit 1; }
    "$BIN" --mode single --backend cpu --model mlp-small --batch 128 --samples 4096 --steps 40 \
        --json >"$T/single.json" 2>"$T/err" || { cat "$T/err"; exit 1; }
    JSON="$T/cmp.json $T/single.json"
else
    echo "the measured case is skipped: $why"
fi
python3 - $JSON <<'EOF'
import json, sys

def ring(k, alpha, beta_link, nbytes):
    """Seconds of an all-reduce over k ranks, alpha per hop, beta s/byte on the slowest link: a ring
    (2(k-1) hops), or, when fewer hops win, a double binary tree (NCCL's: 2 log2(k) hops, every byte
    twice over the link), whichever is shorter, as NCCL chooses."""
    import math
    r = 2 * (k - 1) * alpha + 2 * (k - 1) / k * nbytes * beta_link
    t = 2 * math.ceil(math.log2(k)) * alpha + 2 * nbytes * beta_link
    return min(r, t)

def step(compute, backward, buckets, k, alpha, beta_link):
    """DDP's step: every bucket's all-reduce, hidden behind backward but for the last one."""
    ar = sum(ring(k, alpha, beta_link, b) for b in buckets)
    exposed = max(ar - backward, ring(k, alpha, beta_link, buckets[-1]))
    return ar, compute + exposed

if len(sys.argv) > 2:
    runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    ddp = [r for r in runs if r["config"]["mode"] == "ddp"][0]
    single = json.load(open(sys.argv[2]))
    ph = single["devices"][0]["phases_s_per_step"]
    compute = sum(ph[k] for k in ("data_s", "forward_s", "loss_s", "backward_s", "optimizer_s"))
    backward = ph["backward_s"]
    ar = ddp["predict"]["all_reduce"]
    k0 = ddp["predict"]["collectives_ranks"]
    # the link's alpha and beta from the fit at k0 ranks (predict.h)
    a = ar["alpha_s"] / (2 * (k0 - 1))
    b = ar["beta_s_per_byte"] / (2 * (k0 - 1) / k0)
    buckets = [x["bytes"] for x in ddp["buckets"]]
    row2 = [r for r in ddp["predict"]["rows"] if r["devices"] == 2][0]
    print("measured here: mlp-small on CPU ranks, one per host, hosts joined by 1 Gbit/s (veth, tbf)")
    print("  compute %.3f ms per step (single on the 128 rows of a rank; backward %.3f ms), %.2f MB of"
          " gradients in %d buckets," % (compute * 1e3, backward * 1e3, sum(buckets) / 1e6, len(buckets)))
    print("  all-reduce alpha %.0f us per hop, link %.3f GB/s (fit at %d ranks)" % (a * 1e6, 1e-9 / b, k0))
    print("  at 2 ranks: measured step %.3f ms; --predict's %.3f ms" % (ddp["step_time_s"]["mean"] * 1e3,
                                                                       row2["ddp_step_s"] * 1e3))
    print("  %6s %12s %12s %9s" % ("ranks", "all-reduce", "step", "scaling"))
    for k in (2, 16, 64, 256):
        t_ar, s = step(compute, backward, buckets, k, a, b)
        print("  %6d %9.3f ms %9.3f ms %8.0f%%" % (k, t_ar * 1e3, s * 1e3, 100 * compute / s))

# published specifications (not measured here)
params = 4096 * 8192 + 8192 + 2 * (8192 * 8192 + 8192) + 8192 * 4096 + 4096
nbytes = 4.0 * params
rows = 2048
cap = 25 * 2**20                      # --bucket-mb 25 (the first bucket's 1 MiB aside)
buckets = [cap] * int(nbytes // cap) + [nbytes - cap * int(nbytes // cap)]
flops = 6.0 * params * rows           # backward: 4 of the 6
alpha = 5e-6
nvlink = 450e9
print("published specifications: mlp-large (%.0f M parameters, %.0f MB of fp32 gradients in %d buckets),"
      % (params / 1e6, nbytes / 1e6, len(buckets)))
print("  %d rows per GPU; compute at the H100 SXM's peak: fp32 67 TFLOP/s (%.1f ms), --tf32 495 TFLOP/s"
      " (%.1f ms); alpha %.0f us per hop" % (rows, flops / 67e12 * 1e3, flops / 495e12 * 1e3, alpha * 1e6))
print("  %-40s %6s %12s %11s %8s %11s %8s" % ("network", "GPUs", "all-reduce", "step fp32", "scaling",
                                              "step tf32", "scaling"))
for net, name in ((400e9, "8 x 400 Gbit/s InfiniBand per host"), (12.5e9, "1 x 100 Gbit/s Ethernet per host")):
    for k in (8, 16, 64, 256):
        link = nvlink if k <= 8 else min(nvlink, net)
        cells = []
        for peak in (67e12, 495e12):
            compute = flops / peak
            t_ar, s = step(compute, compute * 4 / 6, buckets, k, alpha, 1.0 / link)
            cells += [s, compute / s]
        print("  %-40s %6d %9.1f ms %8.1f ms %7.0f%% %8.1f ms %7.0f%%" % (
            "one host, NVLink 4" if k <= 8 else name, k, t_ar * 1e3, cells[0] * 1e3, 100 * cells[1],
            cells[2] * 1e3, 100 * cells[3]))
EOF
