#!/usr/bin/env bash
# Deploy one ferro-osd next to an existing Ceph (Pacific 16.2) cluster, in one command:
#   register the OSD (`ceph osd new` with a fresh uuid and cephx key), write its keyring, `ferro-osd --mkfs`
#   (data directory + ferrostore on a block file or device), start the daemon, wait until it is up.
# Prints the OSD id on stdout. Needs the `ceph` CLI with an admin keyring (CEPH_CONF or /etc/ceph/ceph.conf).
#
# usage: deploy-ferro-osd.sh [--conf FILE] [--data-root DIR] [--device PATH] [--size BYTES] [--class CLASS]
#                            [--shards N] [--bin PATH] [--timeout SECONDS]
#   --data-root DIR  where the data directory ferro-osd.<id> goes (default /var/lib/ceph/osd)
#   --device PATH    use this device or file instead of <data dir>/block
#   --size BYTES     size of the block file mkfs creates (default 10G; suffixes K M G T)
#   --class CLASS    CRUSH device class (default ferro), so pools can target ferro-osd OSDs by rule
#   --shards N       ferrostore shards = worker threads (default 0: one per core, at most 8)
#   --bin PATH       the ferro-osd binary (default: ferro-osd on PATH, else target/release/ferro-osd)
#   --force          deploy even if existing pools use CRUSH rules without a device class (see docs/deploy.md)
# Stop it with: kill $(cat <data dir>/ferro-osd.pid)   (it marks itself down first)
set -euo pipefail

conf="${CEPH_CONF:-/etc/ceph/ceph.conf}"
data_root=/var/lib/ceph/osd
device=""
size=10G
class=ferro
shards=0
bin=""
timeout=90
force=""
while [ $# -gt 0 ]; do
    case "$1" in
        --conf) conf="$2"; shift 2 ;;
        --data-root) data_root="$2"; shift 2 ;;
        --device) device="$2"; shift 2 ;;
        --size) size="$2"; shift 2 ;;
        --class) class="$2"; shift 2 ;;
        --shards) shards="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --force) force=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "deploy-ferro-osd: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$bin" ]; then
    bin=$(command -v ferro-osd || true)
    [ -n "$bin" ] || bin="$(cd "$(dirname "$0")/.." && pwd)/target/release/ferro-osd"
fi
[ -x "$bin" ] || { echo "deploy-ferro-osd: no ferro-osd binary at $bin (build: cargo build --release -p ferro-osd)" >&2; exit 1; }
export CEPH_CONF="$conf"

# A pool whose rule takes from a whole tree (no device class) would get some of its PGs moved onto the new OSD,
# which cannot backfill their data: ferro-osd does not serve such pools and those PGs would stay inactive.
unsafe_pools=$(python3 -c "
import json, subprocess
rules = {r['rule_id']: r for r in json.loads(subprocess.check_output(['ceph', 'osd', 'crush', 'rule', 'dump', '-f', 'json']))}
pools = json.loads(subprocess.check_output(['ceph', 'osd', 'pool', 'ls', 'detail', '-f', 'json']))
for p in pools:
    r = rules.get(p['crush_rule'], {})
    takes = [s.get('item_name', '') for s in r.get('steps', []) if s.get('op') == 'take']
    if not takes or any('~' not in t for t in takes):
        print(p['pool_name'])
")
if [ -n "$unsafe_pools" ] && [ -z "$force" ]; then
    echo "deploy-ferro-osd: these pools use CRUSH rules without a device class, so CRUSH would move some of" >&2
    echo "their PGs onto the new OSD (ferro-osd cannot backfill them): $(echo $unsafe_pools)" >&2
    echo "Give them a class rule first, e.g.:" >&2
    echo "  ceph osd crush rule create-replicated replicated-hdd default host hdd" >&2
    echo "  ceph osd pool set POOL crush_rule replicated-hdd" >&2
    echo "or pass --force." >&2
    exit 1
fi

uuid=$(cat /proc/sys/kernel/random/uuid)
key=$(ceph-authtool --gen-print-key)
# `ceph osd new` allocates the id and creates osd.<id> with the osd profile caps.
id=$(printf '{"cephx_secret": "%s"}' "$key" | ceph osd new "$uuid" -i -)
data="$data_root/ferro-osd.$id"
mkdir -p "$data"
printf '[osd.%s]\n\tkey = %s\n' "$id" "$key" > "$data/keyring"
chmod 600 "$data/keyring"

args=(-c "$conf" -i "$id" --osd-data "$data" --keyring "$data/keyring"
      --ferro-osd-shards "$shards" --ferro-osd-device-size "$size" --crush-device-class "$class"
      --log-file "$data/ferro-osd.log")
[ -n "$device" ] && args+=(--ferro-osd-device "$device")
"$bin" "${args[@]}" --mkfs --osd-uuid "$uuid" >&2
setsid nohup "$bin" "${args[@]}" -f >> "$data/ferro-osd.log" 2>&1 < /dev/null &
echo $! > "$data/ferro-osd.pid"

deadline=$(( $(date +%s) + timeout ))
until ceph osd dump -f json | python3 -c "
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(o['osd'] == $id and o['up'] == 1 for o in d['osds']) else 1)"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "deploy-ferro-osd: osd.$id not up after ${timeout}s; see $data/ferro-osd.log" >&2
        exit 1
    fi
    sleep 1
done
echo "deploy-ferro-osd: osd.$id up (data $data, class $class, pid $(cat "$data/ferro-osd.pid"))" >&2
echo "$id"
