#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# Capture real Ceph 16.2.15 traffic between classic daemons (client↔OSD, OSD↔OSD, OSD↔mon/mgr) passively on
# loopback, in msgr2 crc mode, and trim it to the small test fixture crates/ceph-msgs/testdata/classic.pcap.xz.
#
# Scenario (each step bounded by `timeout`, the whole run by a watchdog): a throwaway cluster (mon, mgr, three
# BlueStore OSDs, cephx, every msgr2 mode `crc`); a size-3 pool with writes/reads/appends/truncates/omap/xattrs/
# watch-notify/cls calls from `rados` and python3-rados; kill -9 of an OSD under writes and deletes, then its restart
# (peering, log recovery with push and pull, recovery deletes, force-recovery); a size-2 pool whose OSD is marked
# out and in (backfill: scan, backfill; no backfill-remove in our runs); an EC pool k=2 m=1 (EC sub-ops, EC recovery); deep-scrub
# and scrub of every pool (scrub reservation, replica scrub maps); failed writes (error log entries); pool deletion.
#
# Output: the fixture (only our cluster's connections, only complete frames, at most N messages per type, see
# `cargo run -p ceph-msgs --example trim-capture -- --help`) and, with KEEP_RAW=1, the raw pcap next to it.
#
# Usage: scripts/capture-classic.sh [OUT_FIXTURE]     (default crates/ceph-msgs/testdata/classic.pcap.xz)
# Env:   PER_TYPE=N (messages kept per type, default 12), KEEP_RAW=1, CAPTURE_DIR=/tmp/... (work directory),
#        CARGO_TARGET_DIR (use a private one if another checkout builds into the same target directory meanwhile:
#        cargo then sees other sources' artifacts as fresh and the trimmer fails to build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${1:-$ROOT/crates/ceph-msgs/testdata/classic.pcap.xz}
PER_TYPE=${PER_TYPE:-12}
# OSDs and the mgr bind in this range, so their connections are told apart from other clusters on this host.
PORT_MIN=7400
PORT_MAX=7499
WATCHDOG_S=${WATCHDOG_S:-1500}

[ -f "${HOME:-/root}/.cargo/env" ] && . "${HOME:-/root}/.cargo/env"
if ! command -v tcpdump >/dev/null; then
    echo "== installing tcpdump"
    apt-get install -y tcpdump >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y tcpdump >/dev/null; }
fi
for t in ceph ceph-osd rados xz tcpdump; do
    command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }
done

echo "== building xtask and the trimmer (before the capture, so a build problem costs no cluster run)"
cargo build --quiet -p xtask
cargo build --quiet -p ceph-msgs --example trim-capture

work=$(realpath "$(mktemp -d "${CAPTURE_DIR:-/tmp}/ferro-cap.XXXXXX")")
dir=$work/c
pcap=$work/raw.pcap
tcpdump_pid=""
watchdog_pid=""
finish() {
    rc=$?
    set +e
    [ -n "$watchdog_pid" ] && kill "$watchdog_pid" 2>/dev/null
    [ -n "$tcpdump_pid" ] && kill "$tcpdump_pid" 2>/dev/null && wait "$tcpdump_pid" 2>/dev/null
    [ -d "$dir" ] && cargo xtask cluster down --dir "$dir" >/dev/null 2>&1
    if [ "$rc" -eq 0 ]; then
        rm -rf "$work"
    else
        rm -rf "$dir/osd."*/block 2>/dev/null
        echo "== capture failed (rc=$rc); logs kept in $work" >&2
    fi
    exit "$rc"
}
trap finish EXIT
# Our own copy: the shared target directory may be rebuilt by others while the scenario runs.
trimmer=$work/trim-capture
cp "${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/trim-capture" "$trimmer"
( sleep "$WATCHDOG_S"; echo "== watchdog: ${WATCHDOG_S}s elapsed, aborting" >&2; kill -TERM $$ ) &
watchdog_pid=$!

step() { echo "== $(date -u +%H:%M:%S) $*"; }

# Passive capture of everything TCP on loopback from before the monitor starts; the trimmer keeps only this
# cluster's connections (mon port from ceph.conf, mgr/OSD ports in PORT_MIN..PORT_MAX).
step "tcpdump -i lo -> $pcap"
tcpdump -i lo -s 0 -B 65536 -U -w "$pcap" tcp 2>"$work/tcpdump.log" &
tcpdump_pid=$!
sleep 1

step "cluster up in $dir (mon, mgr, 3 BlueStore OSDs, msgr2 crc everywhere)"
conf=()
for m in ms_cluster_mode ms_service_mode ms_client_mode ms_mon_cluster_mode ms_mon_service_mode ms_mon_client_mode; do
    conf+=(--conf "global:$m=crc")
done
conf+=(--conf "global:ms_bind_port_min=$PORT_MIN" --conf "global:ms_bind_port_max=$PORT_MAX")
conf+=(--conf "global:osd_pool_default_size=3" --conf "global:osd_pool_default_min_size=2")
conf+=(--conf "osd:osd_recovery_sleep=0" --conf "osd:osd_recovery_sleep_hdd=0")
conf+=(--conf "osd:osd_scrub_load_threshold=100" --conf "osd:osd_scrub_during_recovery=true")
conf+=(--conf "osd:osd_heartbeat_interval=2" --conf "osd:osd_heartbeat_grace=8")
conf_line=$(timeout 300 cargo xtask cluster up --dir "$dir" --classic-osds 3 --osd-size-gib 1 "${conf[@]}")
export "${conf_line?}"
export FERRO_CAPTURE_DIR="$dir"
C="timeout 60"

wait_clean() {
    local deadline=$((SECONDS + ${1:-120}))
    while [ $SECONDS -lt $deadline ]; do
        local s
        s=$($C ceph pg stat 2>/dev/null || true)
        if echo "$s" | grep -qE '^[0-9]+ pgs: [0-9]+ active\+clean;'; then return 0; fi
        sleep 2
    done
    echo "   (not clean after ${1:-120}s: $($C ceph pg stat 2>/dev/null))"
}

restart_osd() {
    local id=$1
    # Same marker as testcluster's own daemons, so `cluster down` finds and kills it.
    FERRO_TESTCLUSTER_DIR=$dir setsid ceph-osd -f -c "$dir/ceph.conf" -i "$id" >>"$dir/log/osd.$id.out" 2>&1 </dev/null &
    echo $! >"$dir/pids/osd.$id.pid"
    disown $! # its SIGKILL at teardown is expected, not worth a "Killed" line
    local deadline=$((SECONDS + 90))
    until $C ceph osd dump 2>/dev/null | grep -qE "^osd\.$id up"; do
        [ $SECONDS -lt $deadline ] || { echo "osd.$id did not come up" >&2; return 1; }
        sleep 1
    done
}

payload=$work/payload
head -c 20000 /dev/urandom >"$payload.20k"
head -c 300000 /dev/urandom >"$payload.300k"
echo "hello ferro" >"$payload.small"

step "replicated pool rep (size 3, 16 PGs): rados CLI ops"
$C ceph osd pool create rep 16 16 replicated >/dev/null
$C ceph osd pool application enable rep rados >/dev/null
wait_clean 120
for i in $(seq 1 30); do $C rados -p rep put "obj$i" "$payload.20k"; done
$C rados -p rep put big "$payload.300k"
$C rados -p rep get obj1 "$work/got" && cmp -s "$work/got" "$payload.20k"
$C rados -p rep stat obj2 >/dev/null
$C rados -p rep append obj3 "$payload.small"
$C rados -p rep truncate obj4 100
$C rados -p rep setxattr obj5 user.color blue
$C rados -p rep getxattr obj5 user.color >/dev/null
$C rados -p rep listxattr obj5 >/dev/null
$C rados -p rep rmxattr obj5 user.color
$C rados -p rep setomapval obj6 key1 val1
$C rados -p rep setomapval obj6 key2 val2
$C rados -p rep setomapheader obj6 header
$C rados -p rep listomapvals obj6 >/dev/null
$C rados -p rep getomapval obj6 key1 >/dev/null
$C rados -p rep rmomapkey obj6 key2
$C rados -p rep clearomap obj6
$C rados -p rep lock get obj7 lk >/dev/null 2>&1 || true
$C rados -p rep ls >/dev/null
$C rados -p rep rm obj8
$C rados -p rep rm no-such-object 2>/dev/null || true # a failed write: error log entry (MOSDPGUpdateLogMissing)

step "python3-rados: omap, xattrs, watch/notify, aio writes, compound write ops"
$C /usr/bin/python3 - "$CEPH_CONF" <<'EOF'
import sys, threading, rados
c = rados.Rados(conffile=sys.argv[1]); c.connect(timeout=30)
io = c.open_ioctx("rep")
io.write_full("py1", b"x" * 4096)
io.write("py1", b"y" * 100, 8192)
assert io.read("py1", 100, 8192) == b"y" * 100
io.set_xattr("py1", "user.a", b"1")
assert io.get_xattr("py1", "user.a") == b"1"
list(io.get_xattrs("py1"))
with rados.WriteOpCtx() as op:
    io.set_omap(op, ("k1", "k2", "k3"), (b"v1", b"v2", b"v3"))
    io.operate_write_op(op, "py1")
with rados.ReadOpCtx() as op:
    it, ret = io.get_omap_vals(op, "", "", 10)
    io.operate_read_op(op, "py1")
    assert dict(it) == {"k1": b"v1", "k2": b"v2", "k3": b"v3"}
with rados.WriteOpCtx() as op:
    io.remove_omap_keys(op, ("k1",))
    io.operate_write_op(op, "py1")
got = threading.Event()
def cb(notify_id, notifier_id, watch_id, data):
    got.set()
    return b"ack"
io.write_full("watched", b"w")
w = io.watch("watched", cb)
io.notify("watched", "ping", 5000)
got.wait(10)
w.close()
done = []
for i in range(20):
    done.append(io.aio_write_full("aio%d" % i, b"z" * 8192))
for comp in done:
    comp.wait_for_complete()
io.remove_object("aio0")
io.close(); c.shutdown()
EOF

step "EC pool ec (k=2 m=1, overwrites allowed, min_size 2): writes, partial overwrite, reads"
$C ceph osd erasure-code-profile set k2m1 k=2 m=1 crush-failure-domain=osd >/dev/null
$C ceph osd pool create ec 8 8 erasure k2m1 >/dev/null
$C ceph osd pool set ec allow_ec_overwrites true >/dev/null
$C ceph osd pool set ec min_size 2 >/dev/null
$C ceph osd pool application enable ec rados >/dev/null
wait_clean 120
for i in $(seq 1 10); do $C rados -p ec put "e$i" "$payload.20k"; done
$C rados -p ec get e1 "$work/got" && cmp -s "$work/got" "$payload.20k"
$C /usr/bin/python3 - "$CEPH_CONF" <<'EOF'
import sys, rados
c = rados.Rados(conffile=sys.argv[1]); c.connect(timeout=30)
io = c.open_ioctx("ec")
io.write("e2", b"q" * 512, 1000)   # partial overwrite: read-modify-write with EC sub-reads
assert io.read("e2", 512, 1000) == b"q" * 512
io.set_xattr("e3", "user.x", b"1")
io.close(); c.shutdown()
EOF
$C rados -p ec rm no-such-object 2>/dev/null || true

step "size-2 pool bf for backfill"
$C ceph osd pool create bf 8 8 replicated >/dev/null
$C ceph osd pool set bf size 2 >/dev/null
$C ceph osd pool set bf min_size 1 >/dev/null
$C ceph osd pool application enable bf rados >/dev/null
wait_clean 120
for i in $(seq 1 40); do $C rados -p bf put "b$i" "$payload.small"; done

step "kill -9 osd.2 under writes and deletes (degraded writes), then restart it (peering, log recovery)"
kill -9 "$(cat "$dir/pids/osd.2.pid")"
rm -f "$dir/pids/osd.2.pid"
for i in $(seq 1 15); do $C rados -p rep put "deg$i" "$payload.20k"; done
for i in $(seq 9 14); do $C rados -p rep rm "obj$i"; done       # deletes the restarted OSD must learn about
for i in $(seq 1 5); do $C rados -p rep put "obj$((i + 20))" "$payload.small"; done
for i in $(seq 1 4); do $C rados -p ec put "edeg$i" "$payload.20k"; done
$C ceph osd down 2 >/dev/null 2>&1 || true
sleep 3
restart_osd 2
pg=$($C ceph pg ls-by-pool rep -f json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print((d["pg_stats"] if isinstance(d,dict) else d)[0]["pgid"])' || true)
[ -n "$pg" ] && { $C ceph pg force-recovery "$pg" >/dev/null 2>&1 || true; $C ceph pg cancel-force-recovery "$pg" >/dev/null 2>&1 || true; }
wait_clean 180

step "kill -9 osd.0 (primary of some PGs) under writes, restart (primary pulls)"
kill -9 "$(cat "$dir/pids/osd.0.pid")"
rm -f "$dir/pids/osd.0.pid"
$C ceph osd down 0 >/dev/null 2>&1 || true
for i in $(seq 1 12); do $C rados -p rep put "pull$i" "$payload.20k"; done
restart_osd 0
wait_clean 180

step "osd out 1 / in 1 (remap of pool bf: backfill)"
$C ceph osd out 1 >/dev/null
wait_clean 180
for i in $(seq 41 50); do $C rados -p bf put "b$i" "$payload.small"; done
$C ceph osd in 1 >/dev/null
wait_clean 180

step "deep-scrub and scrub (scrub reservations, replica scrub maps)"
$C ceph osd pool deep-scrub rep >/dev/null 2>&1 || true
$C ceph osd pool deep-scrub ec >/dev/null 2>&1 || true
$C ceph osd pool scrub bf >/dev/null 2>&1 || true
$C ceph osd deep-scrub 1 >/dev/null 2>&1 || true
sleep 25

step "pool deletion (PG removal)"
$C ceph osd pool rm bf bf --yes-i-really-really-mean-it >/dev/null
$C ceph osd pool rm ec ec --yes-i-really-really-mean-it >/dev/null
sleep 8

step "stopping the capture"
mon_port=$(sed -n 's/.*mon host = v2:127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/ceph.conf")
kill "$tcpdump_pid"; wait "$tcpdump_pid" 2>/dev/null || true
tcpdump_pid=""
cat "$work/tcpdump.log" | tail -3
ls -la "$pcap"

if [ -n "${KEEP_RAW:-}" ]; then
    xz -T2 -3 -c "$pcap" >"${OUT%.pcap.xz}.raw.pcap.xz"
    echo "raw capture kept: ${OUT%.pcap.xz}.raw.pcap.xz (port list: $mon_port,$PORT_MIN-$PORT_MAX)"
fi
step "trimming to $OUT (mon port $mon_port, daemons on $PORT_MIN-$PORT_MAX, $PER_TYPE messages per type)"
mkdir -p "$(dirname "$OUT")"
"$trimmer" --ports "$mon_port,$PORT_MIN-$PORT_MAX" --per-type "$PER_TYPE" "$pcap" "${OUT%.xz}"
xz -9 -f "${OUT%.xz}"
ls -la "$OUT"
