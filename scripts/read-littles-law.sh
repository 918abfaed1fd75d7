#!/bin/bash
# SPDX-License-Identifier: LGPL-3.0-or-later
# Trace where a read test's ops wait (Little's law over client, socket, OSD, device, reply; docs/benchmarks.md,
# "What we tried — 64K reads at QD16 (session 10, rd64)"). Attach to a running `cargo xtask bench compare`:
#   scripts/read-littles-law.sh <pid of the bench compare (xtask) process> <out dir> [delay s] [seconds]
# waits for its next non-prefill fio, records `delay` s later for `seconds` s: librados uprobes in fio
# (rados_aio_read / rados_aio_release), io_uring and socket syscalls of fio and the group's OSDs, 64 KiB block
# reads of the whole machine, and the first OSD's `perf dump` around the window; then
#   scripts/read_littles_law.py <out dir>
# prints the decomposition. Needs root, perf with uprobes, ceph (for the admin socket). The uprobes are defined
# on first use (`perf probe -x librados.so.2`) and stay until `perf probe -d 'probe_librados:*'`.
X=$1; O=$2; D=${3:-3}; S=${4:-3}
mkdir -p $O
L=/usr/lib/x86_64-linux-gnu/librados.so.2
perf probe -l 2>/dev/null | grep -q probe_librados:rd_submit || perf probe -q -x $L -a 'rd_submit=rados_aio_read c=%dx:u64'
perf probe -l 2>/dev/null | grep -q probe_librados:rd_release || perf probe -q -x $L -a 'rd_release=rados_aio_release c=%di:u64'
desc() { local p=$1; for c in $(pgrep -P $p); do echo $c; desc $c; done; }
F=""
while kill -0 $X 2>/dev/null; do
  for p in $(desc $X); do
    c=$(cat /proc/$p/cmdline 2>/dev/null | tr '\0' ' ')
    case "$c" in *prefill*) ;; fio*) F="$F $p";; esac
  done
  [ -n "$F" ] && break
  sleep 0.2
done
[ -z "$F" ] && exit 1
sleep 0.5
F=""; OSD=""
for p in $(desc $X); do
  c=$(cat /proc/$p/cmdline 2>/dev/null | tr '\0' ' ')
  case "$c" in *prefill*) ;; fio*) F="$F $p";; *ferro-osd*) OSD="$OSD $p";; esac
done
P=$(echo $F $OSD | tr ' ' ',')
echo "fio=$F osd=$OSD" > $O/pids
sleep $D
CD=$(tr '\0' '\n' < /proc/$(echo $F | cut -d' ' -f1)/cmdline | grep -o '/tmp/ferro-cluster[^/]*' | head -1)
ASOK=$(ls $CD/run/ceph-osd.*.asok 2>/dev/null | head -1)
ceph --admin-daemon $ASOK perf dump > $O/perf0.json 2>/dev/null; date +%s.%N > $O/perf0.t
perf record -k CLOCK_MONOTONIC -q -a -e block:block_rq_issue,block:block_rq_complete --filter 'nr_sector == 128' -o $O/block.data -- sleep $S 2>/dev/null &
perf record -k CLOCK_MONOTONIC -q -p $P -e probe_librados:rd_submit,probe_librados:rd_release \
  -e io_uring:io_uring_submit_req,io_uring:io_uring_complete \
  -e syscalls:sys_exit_recvmsg,syscalls:sys_exit_sendmsg,syscalls:sys_exit_read,syscalls:sys_exit_recvfrom,syscalls:sys_exit_readv,syscalls:sys_exit_sendto,syscalls:sys_exit_writev \
  -o $O/main.data -- sleep $S 2>/dev/null
ceph --admin-daemon $ASOK perf dump > $O/perf1.json 2>/dev/null; date +%s.%N > $O/perf1.t
wait
perf script -i $O/main.data -F comm,tid,pid,time,event,trace > $O/main.txt 2>/dev/null
perf script -i $O/block.data -F time,event,trace > $O/block.txt 2>/dev/null
echo done >> $O/pids
