#!/usr/bin/env bash
# The main job, end to end: set up the machine, build, start a local Ceph cluster, serve a short bounded
# workload, run FerroCeph's part of the demo (scripts/demo-ferro.sh, if present), tear everything down.
#
# The cluster starts with one classic ceph-osd (BlueStore on a sparse file) as the reference; scripts/demo-ferro.sh
# then deploys three ferro-osds next to it and serves a replicated pool from them.
# FERRO_DEMO_KEEP=1 leaves the cluster running (stop it with `cargo xtask cluster down --dir DIR`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
[ -f "${HOME:-/root}/.cargo/env" ] && . "${HOME:-/root}/.cargo/env"

echo "== building"
cargo build --quiet -p xtask

dir=$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/ferro-demo.XXXXXX")")
finish() {
    rc=$?
    if [ -n "${FERRO_DEMO_KEEP:-}" ] && [ "$rc" -eq 0 ]; then
        echo "== cluster left running: export CEPH_CONF=$dir/ceph.conf; stop: cargo xtask cluster down --dir $dir"
        return
    fi
    cargo xtask cluster down --dir "$dir" || rc=1
    if [ "$rc" -eq 0 ]; then rm -rf "$dir"; else echo "== demo failed (rc=$rc); logs kept in $dir/log" >&2; fi
    exit "$rc"
}
trap finish EXIT

echo "== starting a throwaway cluster in $dir (1 mon, 1 mgr, 1 classic OSD)"
start_ns=$(date +%s%N)
conf_line=$(cargo xtask cluster up --dir "$dir" --classic-osds 1)
export "${conf_line?}"   # CEPH_CONF=<dir>/ceph.conf
export FERRO_CLUSTER_DIR="$dir"
echo "== cluster up in $(( ($(date +%s%N) - start_ns) / 1000000 )) ms; $conf_line"
ceph -s

echo "== workload: rados bench, 64 KiB writes for 10 s or 6,000 objects (375 MiB), 8 in flight, pool 'demo'"
ceph osd pool create demo 16 16 replicated >/dev/null
ceph osd pool application enable demo rados >/dev/null
timeout 180 rados bench -p demo 10 write -b 65536 -t 8 --max-objects 6000

# The hook runs with CEPH_CONF and FERRO_CLUSTER_DIR exported, the cluster up and pool 'demo' present.
if [ -f scripts/demo-ferro.sh ]; then
    echo "== scripts/demo-ferro.sh"
    # With the cluster's marker in its environment, every daemon the hook starts is stopped by `cluster down`.
    FERRO_TESTCLUSTER_DIR="$dir" bash scripts/demo-ferro.sh
fi
echo "== demo done"
