# scripts/netns_hosts.sh: two "hosts" on one machine for mpirun, sourced by
# tests/e2e/e2e_mpi_netns.sh and bench/mpi_netns.sh.
#
# Two network namespaces joined by a veth pair, each with an address of its
# own (10.233.0.1 and 10.233.0.2, which exist only inside them) and its own
# host name (hosta, hostb: a UTS namespace per process tree).  mpirun runs in
# the first; it starts the second's ranks through a launch agent that stands
# in for ssh (ip netns exec), so Open MPI's daemons, its out-of-band channel
# and the ranks' TCP transport cross the veth as they would cross a network.
#
#   netns_can            true when namespaces can be made here; else prints why
#   netns_up DIR         make them (names carry this shell's pid), the agent
#                        and hostfiles in DIR (DIR/hosts1: a slot per host,
#                        DIR/hosts2: two)
#   netns_rate RATE      shape both directions of the veth with tbf at RATE
#                        (e.g. 1gbit), or "none" to take the shaping off
#   netns_mpirun ARGS    mpirun (in the first namespace, as hosta) with ARGS
#   netns_down           remove both namespaces (and with them the veth)
# Needs root, ip (iproute2), tc, unshare (util-linux) and Open MPI's mpirun.

NETNS_A=ddpb$$a
NETNS_B=ddpb$$b
NETNS_DIR=
NETNS_NET=10.233.0

netns_can() {
    if [ "$(id -u)" != 0 ]; then
        echo "not root: network namespaces need CAP_NET_ADMIN"
        return 1
    fi
    for t in ip tc unshare mpirun; do
        command -v $t >/dev/null 2>&1 || { echo "$t is not installed"; return 1; }
    done
    probe=ddpb$$probe
    if ! msg=$(ip netns add $probe 2>&1); then
        echo "ip netns add fails here: $msg"
        return 1
    fi
    # entering one remounts / as a slave: that needs / to be a mount point,
    # which it is not in a plain chroot
    if ! msg=$(ip netns exec $probe true 2>&1); then
        ip netns del $probe
        echo "ip netns exec fails here (is / a mount point?): $msg"
        return 1
    fi
    ip netns del $probe
    return 0
}

netns_up() {
    NETNS_DIR=$1
    ip netns add $NETNS_A || return 1
    ip netns add $NETNS_B || return 1
    ip link add ${NETNS_A}v type veth peer name ${NETNS_B}v || return 1
    ip link set ${NETNS_A}v netns $NETNS_A && ip link set ${NETNS_B}v netns $NETNS_B || return 1
    ip -n $NETNS_A addr add $NETNS_NET.1/24 dev ${NETNS_A}v || return 1
    ip -n $NETNS_B addr add $NETNS_NET.2/24 dev ${NETNS_B}v || return 1
    for n in $NETNS_A $NETNS_B; do
        ip -n $n link set lo up && ip -n $n link set ${n}v up || return 1
    done
    # the launch agent: Open MPI runs "AGENT HOST COMMAND" where it would run
    # "ssh HOST COMMAND"; the command is a shell line, as ssh would pass it
    cat >"$NETNS_DIR/agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
$NETNS_NET.1) exec ip netns exec $NETNS_A unshare --uts sh -c "hostname hosta; \$*" ;;
$NETNS_NET.2) exec ip netns exec $NETNS_B unshare --uts sh -c "hostname hostb; \$*" ;;
*) echo "agent: no host \$host here" >&2; exit 1 ;;
esac
EOF
    chmod +x "$NETNS_DIR/agent"
    printf '%s.1 slots=1\n%s.2 slots=1\n' $NETNS_NET $NETNS_NET >"$NETNS_DIR/hosts1"
    printf '%s.1 slots=2\n%s.2 slots=2\n' $NETNS_NET $NETNS_NET >"$NETNS_DIR/hosts2"
}

# tbf at RATE on both ends (both directions), a bucket of 1 ms at that rate
# (at least 64 KiB), packets queued up to 100 ms; "none" takes it off
netns_rate() {
    rate=$1
    bits=$(echo "$rate" | awk '{ n = $0 + 0; u = tolower($0); sub(/^[0-9.]+/, "", u);
        m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1; print n * m }')
    burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 / 1000; if (x < 65536) x = 65536; printf "%d", x }')
    for end in "$NETNS_A ${NETNS_A}v" "$NETNS_B ${NETNS_B}v"; do
        set -- $end
        if [ "$rate" = none ]; then
            tc -n $1 qdisc del dev $2 root 2>/dev/null
        else
            tc -n $1 qdisc replace dev $2 root tbf rate "$rate" burst "$burst" latency 100ms || return 1
        fi
    done
    return 0
}

# -q: mpirun's notes stay out of stderr; the TCP transport and the
# out-of-band channel on the veth's network alone
netns_mpirun() {
    ip netns exec $NETNS_A unshare --uts sh -c 'hostname hosta; exec "$@"' sh \
        mpirun --allow-run-as-root --oversubscribe -q \
        --mca plm_rsh_agent "$NETNS_DIR/agent" --mca btl tcp,self \
        --mca btl_tcp_if_include $NETNS_NET.0/24 --mca oob_tcp_if_include $NETNS_NET.0/24 "$@"
}

netns_down() {
    ip netns del $NETNS_A 2>/dev/null
    ip netns del $NETNS_B 2>/dev/null
    return 0
}
