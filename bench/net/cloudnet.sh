#!/usr/bin/env bash
# cloudnet.sh: a cloud-like network on one machine for FaaST's benchmarks (Faa$T §6.1, §6.5 / Fig. 12).
#
# The paper's instances are VMs that read blob storage at about 90 MB/s each and talk to each other at
# about 750 MB/s (a 1:8.3 ratio): that gap is what makes bandwidth scale-out pay (§4's T_DR). On loopback
# everything runs at memory speed and the gap vanishes, so the benchmarks run their instances here:
#
#   root namespace                               instance namespace PREFIX-i (i = 0..N-1)
#   ┌──────────────────────────────┐             ┌──────────────────────────────┐
#   │ bridge PREFIXbr              │  veth pair  │ eth0  198.18.K.(10+i)/24     │
#   │   198.18.K.1/24 = "storage"  ├─PREFIXh<i>──┤ lo up, no default route      │
#   │   (Azurite listens here)     │             │ (the runtime host runs here) │
#   │   198.18.K.2/24 = "platform" │             └──────────────────────────────┘
#   │   (frontend, controller,     │
#   │    benchmark driver)         │
#   └──────────────────────────────┘
#
# Shaping, on both ends of each veth pair (egress only, so no ifb is needed: whatever one end receives
# is what the other end sent, and both ends are ours):
#   - PREFIXh<i> (root side) egress = what instance i RECEIVES. HTB class 1:10 (source = storage
#     address) at --storage-mbps, class 1:20 (source = another instance in the subnet) at --peer-mbps.
#   - eth0 in PREFIX-i egress = what instance i SENDS. Class 1:10 (destination = storage) at
#     --storage-mbps, class 1:20 (destination = the subnet) at --peer-mbps.
#   - Class 1:30 (the default: ARP, the platform address, anything unmatched) is left fast: the
#     frontend, the controller and the benchmark's client stand outside the VMs whose links the paper
#     measures, so their traffic must not count against an instance's storage or peer budget. The
#     platform address is the bridge's primary one, so a connection this namespace opens to an
#     instance leaves from it (not from the storage address, whose traffic is shaped as storage).
#   The classes are siblings, not children of a common ceiling: as on a VM, reading storage does not
#   slow peer traffic down. Optional netem delay is a leaf under 1:10 / 1:20, applied per direction on
#   each end, so a round trip gains twice the delay.
#
# Addresses come only from 198.18.0.0/15 (RFC 2544 benchmarking, never routed), only on interfaces this
# script creates; the namespaces have no default route, so nothing in them reaches off the machine. The
# machine's own interfaces and qdiscs are never touched. Every name starts with PREFIX, so `down` finds
# what an earlier `up` made even after a crash, and removes it; `down` of nothing is a success.
#
# Defaults: the machine these benchmarks were built on (2 vCPUs) cannot serve 4 instances × 90 MB/s from
# one Azurite and also bridge 750 MB/s between instances (see docs/benchmarks.md, "A cloud-like network"),
# so the defaults are the paper's figures halved, keeping its 1:8.3 ratio: 45 MB/s (360 Mbit/s) from
# storage and 375 MB/s (3000 Mbit/s) between instances. Pass --storage-mbps 720 --peer-mbps 6000 for the
# paper's absolute numbers on a machine that can carry them.
set -Eeuo pipefail

usage() {
    cat <<'EOF'
usage: bench/net/cloudnet.sh up|down|status [options]
  up        create the bridge (storage address) and N shaped instance namespaces (an existing network
            of the same prefix is removed first)
  down      remove every namespace, veth and bridge of the prefix (idempotent)
  status    print the network of the prefix (exit 3 when it is not up)
options:
  --instances N            instance namespaces (default 2, 1..100)
  --storage-mbps R         per-instance Mbit/s to and from the storage address (default 360 = 45 MB/s)
  --peer-mbps R            per-instance Mbit/s to and from other instances (default 3000 = 375 MB/s)
  --latency-ms D           one-way delay added to storage and peer traffic (default 0)
  --storage-latency-ms D   one-way delay to and from storage only
  --peer-latency-ms D      one-way delay between instances only
  --prefix NAME            name prefix, [a-z][a-z0-9]{0,7} (default fcn)
  --subnet K               use 198.18.K.0/24, K in 0..255 (default 0); two networks need two subnets
output of up and status, one key=value per line:
  prefix= bridge= subnet= storage= platform= storage_mbps= peer_mbps= storage_latency_ms= peer_latency_ms=
  instances=N  then  instance.I=NAMESPACE ADDRESS  for each instance
EOF
}

die() { echo "cloudnet: $*" >&2; exit 2; }

command=${1:-}
[[ -n "$command" ]] || { usage >&2; exit 2; }
shift
case "$command" in
    up|down|status) ;;
    -h|--help|help) usage; exit 0 ;;
    *) die "unknown command '$command' (up, down or status)" ;;
esac

instances=2
storage_mbps=360
peer_mbps=3000
storage_latency=0
peer_latency=0
prefix=fcn
subnet=0
while [[ $# -gt 0 ]]; do
    [[ $# -ge 2 ]] || die "option $1 needs a value"
    case "$1" in
        --instances) instances=$2 ;;
        --storage-mbps) storage_mbps=$2 ;;
        --peer-mbps) peer_mbps=$2 ;;
        --latency-ms) storage_latency=$2; peer_latency=$2 ;;
        --storage-latency-ms) storage_latency=$2 ;;
        --peer-latency-ms) peer_latency=$2 ;;
        --prefix) prefix=$2 ;;
        --subnet) subnet=$2 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift 2
done

# Names: interface names are at most 15 characters; PREFIX (≤ 8) + "h" + index (≤ 2 digits) fits.
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--prefix '$prefix': want a lower-case letter then up to 7 letters or digits"
[[ "$instances" =~ ^[0-9]+$ ]] && (( instances >= 1 && instances <= 100 )) || die "--instances '$instances': want 1..100"
[[ "$subnet" =~ ^[0-9]+$ ]] && (( subnet <= 255 )) || die "--subnet '$subnet': want 0..255"
for pair in "storage-mbps:$storage_mbps" "peer-mbps:$peer_mbps"; do
    [[ "${pair#*:}" =~ ^[0-9]+$ ]] && (( ${pair#*:} >= 1 )) || die "--${pair%%:*} '${pair#*:}': want a whole number of Mbit/s, at least 1"
done
for pair in "storage-latency-ms:$storage_latency" "peer-latency-ms:$peer_latency"; do
    [[ "${pair#*:}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--${pair%%:*} '${pair#*:}': want a number of milliseconds, 0 or more"
done

bridge="${prefix}br"
net="198.18.${subnet}"
storage="${net}.1"
platform="${net}.2"
state_dir=/run/faast-cloudnet
state_file="$state_dir/$prefix.env"

need_tools() {
    [[ $EUID -eq 0 ]] || die "needs root (network namespaces, veth, tc); running as $(id -un)"
    command -v ip >/dev/null || die "'ip' (iproute2) is not installed"
    command -v tc >/dev/null || die "'tc' (iproute2) is not installed"
}

# Everything of the prefix, found by name (not from the state file, which a crash may not have written).
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-[0-9]+$" || true; }
our_links() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${prefix}(br|h[0-9]+)$" || true; }

do_down() {
    local ns link
    for ns in $(our_namespaces); do
        # Whatever still runs inside keeps a namespace alive only as a mount; the veth goes with `del`.
        ip netns del "$ns" 2>/dev/null || true
    done
    for link in $(our_links); do
        ip link del "$link" 2>/dev/null || true
    done
    rm -f "$state_file"
    local left
    left="$(our_namespaces) $(our_links)"
    [[ -z "${left// /}" ]] || die "down: could not remove: $left"
}

# HTB on one end of a veth: class 1:10 for storage traffic, 1:20 for peer traffic, 1:30 default.
# $1 device, $2 "src" (root side: what the instance receives) or "dst" (instance side: what it sends),
# $3 the command prefix (empty, or "ip netns exec NS").
shape() {
    local dev=$1 dir=$2; shift 2
    local run=("$@")
    "${run[@]}" tc qdisc replace dev "$dev" root handle 1: htb default 30
    # quantum: HTB's default (rate / r2q) exceeds its 200000-byte maximum at these rates; one 64 KiB
    # GSO segment per round is fair enough between two classes that never borrow from each other.
    # burst: tc's default (rate / HZ, about 1.5 KB here) is smaller than one 64 KiB GSO segment of a
    # veth, which then never fits the bucket and the class runs far below its rate; 4 ms of the rate
    # (at least 128 KiB) lets whole segments through while keeping the average at the rate.
    local storage_burst=$(( storage_mbps * 1000 * 1000 / 8 / 250 )) peer_burst=$(( peer_mbps * 1000 * 1000 / 8 / 250 ))
    (( storage_burst >= 131072 )) || storage_burst=131072
    (( peer_burst >= 131072 )) || peer_burst=131072
    "${run[@]}" tc class add dev "$dev" parent 1: classid 1:10 htb rate "${storage_mbps}mbit" ceil "${storage_mbps}mbit" \
        burst "$storage_burst" cburst "$storage_burst" quantum 65536
    "${run[@]}" tc class add dev "$dev" parent 1: classid 1:20 htb rate "${peer_mbps}mbit" ceil "${peer_mbps}mbit" \
        burst "$peer_burst" cburst "$peer_burst" quantum 65536
    "${run[@]}" tc class add dev "$dev" parent 1: classid 1:30 htb rate 40gbit burst 1048576 cburst 1048576 quantum 65536
    "${run[@]}" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip "$dir" "${platform}/32" flowid 1:30
    "${run[@]}" tc filter add dev "$dev" parent 1: protocol ip prio 2 u32 match ip "$dir" "${storage}/32" flowid 1:10
    "${run[@]}" tc filter add dev "$dev" parent 1: protocol ip prio 3 u32 match ip "$dir" "${net}.0/24" flowid 1:20
    # netem's queue must hold a delay's worth of packets at the class rate, or it drops instead of delaying.
    if [[ "$storage_latency" != 0 && "$storage_latency" != 0.0 ]]; then
        "${run[@]}" tc qdisc add dev "$dev" parent 1:10 handle 10: netem delay "${storage_latency}ms" limit 100000
    fi
    if [[ "$peer_latency" != 0 && "$peer_latency" != 0.0 ]]; then
        "${run[@]}" tc qdisc add dev "$dev" parent 1:20 handle 20: netem delay "${peer_latency}ms" limit 100000
    fi
}

print_status() {
    echo "prefix=$prefix"
    echo "bridge=$bridge"
    echo "subnet=${net}.0/24"
    echo "storage=$storage"
    echo "platform=$platform"
    echo "storage_mbps=$storage_mbps"
    echo "peer_mbps=$peer_mbps"
    echo "storage_latency_ms=$storage_latency"
    echo "peer_latency_ms=$peer_latency"
    echo "instances=$instances"
    local i
    for (( i = 0; i < instances; i++ )); do
        echo "instance.$i=${prefix}-$i ${net}.$((10 + i))"
    done
}

do_up() {
    (( 10 + instances - 1 <= 254 )) || die "--instances $instances does not fit in ${net}.0/24"
    do_down
    # The subnet must be nobody else's (another prefix's network, or anything else on this machine).
    if ip -o -4 addr show 2>/dev/null | awk '{print $4}' | grep -qE "^${net//./\\.}\."; then
        die "subnet ${net}.0/24 is already in use on this machine: $(ip -o -4 addr show | awk -v n="${net}." 'index($4, n) == 1 {print $2, $4}' | tr '\n' ' ')(pick another --subnet)"
    fi
    # From here on a failure removes what was made so far.
    trap 'do_down; exit 2' ERR

    # The bridge: the storage address lives on it, in the root namespace, so Azurite (and the benchmark
    # driver) run there unchanged. Bridged traffic is kept away from the machine's iptables (per bridge).
    ip link add "$bridge" type bridge nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0
    echo 1 > "/proc/sys/net/ipv6/conf/$bridge/disable_ipv6"
    # The platform address first: the primary address is the source of connections from this namespace.
    ip addr add "${platform}/24" dev "$bridge"
    ip addr add "${storage}/24" dev "$bridge"
    ip link set "$bridge" up
    # Latency needs netem, which some kernels leave out (CONFIG_NET_SCH_NETEM; the 2-vCPU VMs these
    # benchmarks were built on have HTB but not netem): try it on our own bridge first, and refuse clearly.
    if [[ "$storage_latency" != 0 && "$storage_latency" != 0.0 ]] || [[ "$peer_latency" != 0 && "$peer_latency" != 0.0 ]]; then
        if ! tc qdisc add dev "$bridge" root netem delay 1ms 2>/dev/null; then
            do_down
            die "--latency-ms needs the netem qdisc, which this kernel does not have (CONFIG_NET_SCH_NETEM); run without latency"
        fi
        tc qdisc del dev "$bridge" root
    fi

    local i ns host addr
    for (( i = 0; i < instances; i++ )); do
        ns="${prefix}-$i"
        host="${prefix}h$i"
        addr="${net}.$((10 + i))"
        ip netns add "$ns"
        ip link add "$host" type veth peer name "${prefix}n$i"
        ip link set "${prefix}n$i" netns "$ns"
        ip netns exec "$ns" ip link set "${prefix}n$i" name eth0
        echo 1 > "/proc/sys/net/ipv6/conf/$host/disable_ipv6"
        ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6'
        ip link set "$host" master "$bridge"
        ip link set "$host" up
        ip netns exec "$ns" ip link set lo up
        ip netns exec "$ns" ip addr add "${addr}/24" dev eth0
        ip netns exec "$ns" ip link set eth0 up
        shape "$host" src
        shape eth0 dst ip netns exec "$ns"
    done
    trap - ERR

    mkdir -p "$state_dir"
    print_status > "$state_file"
    print_status
}

do_status() {
    [[ -f "$state_file" && -n "$(our_links)" ]] || { echo "cloudnet: no network with prefix $prefix is up" >&2; exit 3; }
    cat "$state_file"
}

need_tools
case "$command" in
    up) do_up ;;
    down) do_down ;;
    status) do_status ;;
esac
