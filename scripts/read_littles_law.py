#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-3.0-or-later
"""Where a read test's ops wait, by Little's law (L = throughput x time), from scripts/read-littles-law.sh output.

Cumulative curves of the window, in ops: A fio called rados_aio_read, W the client's sendmsg bytes (requests),
R the OSDs' received bytes (ring receives and inline recvmsg), Ds device reads submitted (io_uring READ),
Dr device reads reaped (their completion posted to the OSD's ring), S the OSDs' sent bytes (ring sendmsg, at
submission), K the client's received bytes (read/recv syscalls), C fio called rados_aio_release. Byte curves are
scaled to ops by the window's totals. The mean gap between two neighbouring curves is the mean number of ops in
that stage; as the window starts with an unknown number in each stage, the gap is measured against its 2nd
percentile in each of 30 sub-windows (a stage that empties now and then: all but the device). The device stage
is exact (READ submissions matched to their completions; 64 KiB block requests issue -> complete matched by
sector, their mean latency times the read rate, since perf loses some block completions on a busy machine). The sum of the stages comes out above the queue depth by a few ops (each baseline is a low percentile,
not the true empty moment); the shares are what to read."""
import collections
import json
import re
import sys

NSUB = 30
QUANT = 0.02


def main(d):
    head = open(f"{d}/pids").read().split("\n")[0]
    f_part, o_part = head.split("osd=")
    fio = set(f_part.replace("fio=", "").split())
    osd = set(o_part.split())
    line_re = re.compile(r"^\s*(\S.*?)\s+(\d+)/(\d+)\s+(\d+\.\d+):\s+(\S+):\s+(.*)$")
    ev = collections.defaultdict(list)
    sub = {}
    for ln in open(f"{d}/main.txt"):
        m = line_re.match(ln)
        if not m:
            continue
        _comm, pid, _tid, t, e, tr = m.groups()
        t = float(t)
        side = "F" if pid in fio else ("O" if pid in osd else None)
        if side is None:
            continue
        if e.startswith("probe_librados"):
            c = re.search(r"c=(\d+)", tr)
            ev[e.split(":")[1]].append((t, int(c.group(1)) if c else 0))
        elif e == "io_uring:io_uring_submit_req" and side == "O":
            req = re.search(r"req (0x[0-9a-f]+)", tr).group(1)
            op = re.search(r"opcode (\S+),", tr).group(1)
            sub[req] = (op, t)
            ev["sub_" + op].append((t, 1))
        elif e == "io_uring:io_uring_complete" and side == "O":
            req = re.search(r"req (0x[0-9a-f]+)", tr).group(1)
            res = int(re.search(r"result (-?\d+)", tr).group(1))
            op, ts = sub.pop(req, ("?", None))
            ev["cmp_" + op].append((t, res, ts))
        elif e.startswith("syscalls:sys_exit_"):
            r = re.search(r"0x([0-9a-f]+)", tr)
            ret = int(r.group(1), 16) if r else -1
            if ret >= 1 << 63:
                ret -= 1 << 64
            if ret > 0:
                ev[side + "_" + e.split("sys_exit_")[1]].append((t, ret))
    issued, dev = {}, []
    for ln in open(f"{d}/block.txt"):
        m = re.match(r"\s*(\d+\.\d+):\s+block:(\S+):\s+\S+\s+(\S+)\s+.*?(\d+) \+ 128", ln)
        if not m or "R" not in m.group(3):
            continue
        t, k, sec = float(m.group(1)), m.group(2), m.group(4)
        if k == "block_rq_issue":
            issued[sec] = t
        elif sec in issued:
            dev.append(t - issued.pop(sec))
    t0 = min(x[0] for x in ev["rd_submit"])
    t1 = max(x[0] for x in ev["rd_submit"])
    span = t1 - t0
    nops = sum(1 for x in ev["rd_release"] if t0 <= x[0] <= t1)
    iops = nops / span

    def counts(lst):
        return [(x[0], 1.0) for x in lst if t0 <= x[0] <= t1]

    def scaled(lst):
        c = [(x[0], float(x[1])) for x in lst if t0 <= x[0] <= t1]
        tot = sum(b for _, b in c)
        return [(t, b * nops / tot) for t, b in c] if tot else c

    reads_sub = sorted(ev["sub_READ_FIXED"] + ev["sub_READ"])
    reads_done = sorted((x[0], 1) for x in ev["cmp_READ_FIXED"] + ev["cmp_READ"])
    recv = sorted([(x[0], x[1]) for k in ("cmp_RECV", "cmp_RECVMSG") for x in ev[k] if x[1] > 0] + ev["O_recvmsg"])
    sends = sorted((x[2] or x[0], x[1]) for k in ("cmp_SENDMSG", "cmp_SEND") for x in ev[k] if x[1] > 0)
    crecv = sorted(ev["F_read"] + ev["F_recvfrom"] + ev["F_recvmsg"] + ev["F_readv"])
    curves = [
        ("A", "fio submits", counts(ev["rd_submit"])),
        ("W", "client sent", scaled(ev["F_sendmsg"] + ev["F_sendto"] + ev["F_writev"])),
        ("R", "OSD received", scaled(recv)),
        ("Ds", "device read submitted", counts(reads_sub)),
        ("Dr", "device read reaped", counts(reads_done)),
        ("S", "OSD sent", scaled(sends)),
        ("K", "client received", scaled(crecv)),
        ("C", "fio releases", counts(ev["rd_release"])),
    ]

    def gap(a, b):
        evs = sorted([(t, w) for t, w in a] + [(t, -w) for t, w in b])
        x, out, i = 0.0, [], 0
        for k in range(NSUB):
            s0, s1 = t0 + span * k / NSUB, t0 + span * (k + 1) / NSUB
            while i < len(evs) and evs[i][0] < s0:
                x += evs[i][1]
                i += 1
            last, area, segs = s0, 0.0, []
            while i < len(evs) and evs[i][0] < s1:
                area += x * (evs[i][0] - last)
                segs.append((x, evs[i][0] - last))
                last = evs[i][0]
                x += evs[i][1]
                i += 1
            area += x * (s1 - last)
            segs.append((x, s1 - last))
            segs.sort()
            acc, base = 0.0, segs[0][0]
            for v, dt in segs:
                acc += dt
                if acc >= QUANT * (s1 - s0):
                    base = v
                    break
            out.append(area / (s1 - s0) - base)
        return sum(out) / len(out)

    rt = [x[0] - x[2] for x in ev["cmp_READ_FIXED"] + ev["cmp_READ"] if x[2]]
    lat, open_ = [], {}
    for t, k, c in sorted([(t, 1, c) for t, c in ev["rd_submit"]] + [(t, 0, c) for t, c in ev["rd_release"]]):
        if k:
            open_[c] = t
        elif c in open_:
            lat.append(t - open_.pop(c))
    print(f"window {span:.2f} s, {nops} ops, {iops:.0f} IOPS; fio latency mean {sum(lat) / len(lat) * 1e6:.0f} us "
          f"(ops in flight {sum(lat) / span:.2f})")
    print(f"{'stage':42} {'ops':>6} {'us/op':>7}")
    for (ka, na, a), (kb, nb, b) in zip(curves, curves[1:]):
        if ka == "Ds":
            dev_l = sum(rt) / span
            # perf drops some block completions under load (up to half seen): mean of the matched pairs x rate
            blk_us = sum(dev) / len(dev) * 1e6 if dev else float("nan")
            blk_l = blk_us * len(rt) / span / 1e6
            print(f"{'Ds->Dr device read (submit -> reaped)':42} {dev_l:6.2f} {dev_l / iops * 1e6:7.0f}")
            print(f"{'   of it at the device (block issue->done)':42} {blk_l:6.2f} {blk_us:7.0f}"
                  f"   ({len(dev)} of {len(rt)} reads' block completions traced)")
            continue
        g = gap(a, b)
        print(f"{ka + '->' + kb + ' ' + na + ' -> ' + nb:42} {g:6.2f} {g / iops * 1e6:7.0f}")
    try:
        p0 = json.load(open(f"{d}/perf0.json"))["osd"]
        p1 = json.load(open(f"{d}/perf1.json"))["osd"]
        n = p1["op_r_latency"]["avgcount"] - p0["op_r_latency"]["avgcount"]
        s = p1["op_r_latency"]["sum"] - p0["op_r_latency"]["sum"]
        dt = float(open(f"{d}/perf1.t").read()) - float(open(f"{d}/perf0.t").read())
        print(f"first OSD perf dump: op_r_latency {s / max(n, 1) * 1e6:.0f} us, {n / dt:.0f} reads/s: "
              f"{n / dt * s / max(n, 1):.2f} reads inside it")
    except (OSError, KeyError, ValueError):
        pass


if __name__ == "__main__":
    main(sys.argv[1])
