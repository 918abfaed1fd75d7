#!/usr/bin/env bash
# FerroCeph's part of the demo (called by scripts/demo.sh with CEPH_CONF and FERRO_CLUSTER_DIR exported, the
# cluster up with one classic BlueStore OSD and its pool 'demo'): deploy three ferro-osds next to it (one command
# each), put a replicated pool (size 3, min_size 2) on them with a CRUSH rule by device class, and serve
# unmodified clients from it — rados put/get and rados bench write/seq/rand — with the same bench on the
# BlueStore pool for reference; then show that the three replicas of an object are identical.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CEPH_CONF:?run from scripts/demo.sh (or export CEPH_CONF)}"
dir="${FERRO_CLUSTER_DIR:-$(dirname "$CEPH_CONF")}"

echo "== building ferro-osd (release)"
cargo build --quiet --release -p ferro-osd

echo "== giving the existing pools a device-class rule (hdd), so CRUSH keeps them off the new OSD"
ceph osd crush rule create-replicated on-hdd default osd hdd >/dev/null
for p in $(ceph osd pool ls); do ceph osd pool set "$p" crush_rule on-hdd >/dev/null; done

echo "== deploying three ferro-osds next to the cluster (scripts/deploy-ferro-osd.sh, one shard each)"
ids=()
for _ in 1 2 3; do
    ids+=("$(./scripts/deploy-ferro-osd.sh --data-root "$dir" --size 3G --class ferro --shards 1 \
             --bin target/release/ferro-osd)")
done
id=${ids[0]}
ceph osd tree

echo "== pool 'ferro' (size 3, min_size 2) on ferro-osd OSDs only (CRUSH rule by device class 'ferro')"
# One host here, so the failure domain is the OSD.
ceph osd crush rule create-replicated on-ferro default osd ferro >/dev/null
ceph osd pool create ferro 32 32 replicated on-ferro >/dev/null
ceph osd pool set ferro size 3 >/dev/null
ceph osd pool set ferro min_size 2 >/dev/null
ceph osd pool application enable ferro rados >/dev/null
for _ in $(seq 1 90); do
    ceph pg stat | grep -q 'active+clean' && ! ceph pg stat | grep -qE 'peering|activating|unknown|creating' && break
    sleep 1
done
ceph pg stat

echo "== rados put / get / stat / ls on the ferro pool"
tmp=$(mktemp -d)
echo "hello from ferro-osd" > "$tmp/in"
rados -p ferro put greeting "$tmp/in"
rados -p ferro get greeting "$tmp/out"
cmp "$tmp/in" "$tmp/out" && echo "round trip OK: $(cat "$tmp/out")"
rados -p ferro stat greeting
rados -p ferro setomapval greeting lang en
rados -p ferro listomapvals greeting
rados -p ferro ls
rm -rf "$tmp"

echo "== the object's three replicas (ceph daemon osd.N ferro object-digest <pgid>: name, size, crc32c)"
pgid=$(ceph osd map ferro greeting -f json | sed -n 's/.*"pgid":"\([^"]*\)".*/\1/p')
ceph osd map ferro greeting
for o in "${ids[@]}"; do
    echo "osd.$o: $(ceph daemon "osd.$o" ferro object-digest "$pgid" | tr -d '\n' | head -c 300)"
done

for pool in ferro demo; do
    echo "== rados bench on pool '$pool' ($( [ "$pool" = ferro ] && echo "3 ferro-osds, size 3" || echo "BlueStore, size 1" )): 5 s each, 4 KiB and 64 KiB, 16 in flight"
    timeout 120 rados bench -p "$pool" 5 write -b 4096 -t 16 --max-objects 20000 --no-cleanup | grep -E '^(Bandwidth|Average IOPS|Average Latency)'
    timeout 120 rados bench -p "$pool" 5 rand -t 16 | grep -E '^(Bandwidth|Average IOPS|Average Latency)'
    timeout 120 rados bench -p "$pool" 5 write -b 65536 -t 16 --max-objects 6000 --no-cleanup | grep -E '^(Bandwidth|Average IOPS|Average Latency)'
    timeout 120 rados bench -p "$pool" 5 seq -t 16 | grep -E '^(Bandwidth|Average IOPS|Average Latency)'
done

echo "== cluster view"
ceph -s
ceph osd df
ceph osd perf
ceph daemon "osd.$id" status; echo
echo "== ferro-osd demo done"
