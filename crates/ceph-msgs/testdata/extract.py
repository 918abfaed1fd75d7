#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-3.0-or-later
"""Derive the small message fixture `mon-messages.bin` from ../shared/captures/crc/crc.pcap.xz.

Reassembles the TCP streams to the mon (port 3700), parses msgr2.1 crc-mode frames and keeps a handful of MESSAGE
frames per message type that mon clients exchange. Output records (all little-endian):
  u16 type, u16 version, u16 compat, u16 priority, u64 tid, then front, middle, data each as u32 len + bytes.
The file starts with the 8-byte magic b"FRMSGS1\\n". Usage: extract.py CAPTURE.pcap.xz OUT.bin

With `--session PORT OUTDIR CAPTURE.pcap.xz` instead, it writes the raw TCP byte streams of the client session from local port
PORT to the mon (`c2s.bin`, `s2c.bin`): msgr2 banner and frames exactly as on the wire.
"""
import collections, lzma, struct, sys

MON_PORT = 3700


def tcp_streams(data):
    magic, = struct.unpack('<I', data[:4])
    assert magic == 0xa1b2c3d4, 'expected a little-endian microsecond pcap'
    linktype, = struct.unpack('<I', data[20:24])
    hdr = {1: 14, 113: 16, 276: 20, 0: 4}.get(linktype, 0)
    off, flows = 24, collections.OrderedDict()
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack('<IIII', data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        ip = pkt[hdr:]
        if not ip or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        tcp = ip[ihl:struct.unpack('>H', ip[2:4])[0]]
        sp, dp, seq = struct.unpack('>HHI', tcp[:8])
        payload = tcp[(tcp[12] >> 4) * 4:]
        f = flows.get((sp, dp))
        if f is None:
            if not tcp[13] & 0x02:
                continue
            f = flows[(sp, dp)] = {'next': seq + 1, 'segs': {}}
        if payload:
            f['segs'].setdefault(seq, payload)
    out = collections.OrderedDict()
    for key, f in flows.items():
        buf, nxt, segs = bytearray(), f['next'], f['segs']
        while True:
            p = segs.get(nxt)
            if p is None:
                over = [s for s in segs if s < nxt < s + len(segs[s])]
                if not over:
                    break
                p = segs[over[0]][nxt - over[0]:]
            buf += p
            nxt = (nxt + len(p)) & 0xffffffff
        out[key] = bytes(buf)
    return out


def messages(buf):
    """Yield (header2 fields, front, middle, data) for every MESSAGE frame of a msgr2.1 crc-mode stream."""
    if not buf.startswith(b'ceph v2\n'):
        return
    off = 10 + struct.unpack('<H', buf[8:10])[0]
    while off + 32 <= len(buf):
        pre = buf[off:off + 32]
        tag, nseg = pre[0], pre[1]
        lens = [struct.unpack('<I', pre[2 + 6 * i:6 + 6 * i])[0] for i in range(4)]
        off += 32
        segs = [buf[off:off + lens[0]]]
        off += lens[0] + 4
        if nseg > 1:
            for i in range(1, 4):
                segs.append(buf[off:off + lens[i]])
                off += lens[i]
            off += 13
        else:
            segs += [b'', b'', b'']
        if off > len(buf):
            return
        if tag == 17:
            yield struct.unpack('<QQHHHIHQBHH', segs[0]), segs[1], segs[2], segs[3]


# type -> how many to keep (smallest first, at most MAX_BYTES each)
KEEP = {4: 1, 5: 1, 15: 4, 16: 1, 17: 2, 18: 2, 19: 2, 20: 2, 41: 6, 50: 4, 51: 4, 62: 1, 1796: 1}
MAX_BYTES = 3000


def main():
    if sys.argv[1] == '--session':
        port, outdir = int(sys.argv[2]), sys.argv[3]
        streams = tcp_streams(lzma.open(sys.argv[4]).read())
        open(outdir + '/c2s.bin', 'wb').write(streams[(port, MON_PORT)])
        open(outdir + '/s2c.bin', 'wb').write(streams[(MON_PORT, port)])
        return
    streams = tcp_streams(lzma.open(sys.argv[1]).read())
    found = collections.defaultdict(dict)
    for key, buf in streams.items():
        if MON_PORT not in key:
            continue
        for h, front, middle, data in messages(buf):
            _, tid, typ, prio, ver, _, _, _, _, compat, _ = h
            size = len(front) + len(middle) + len(data)
            if typ in KEEP and size <= MAX_BYTES:
                # dedupe identical payloads; prefer variety of sizes
                found[typ].setdefault((front, middle, data), (ver, compat, prio, tid))
    out = bytearray(b'FRMSGS1\n')
    for typ in sorted(found):
        items = sorted(found[typ].items(), key=lambda kv: len(kv[0][0]) + len(kv[0][2]))
        n = KEEP[typ]
        # keep the smallest and the largest ones below the limit
        pick = items[:(n + 1) // 2] + items[len(items) - n // 2:] if len(items) > n else items
        for (front, middle, data), (ver, compat, prio, tid) in pick:
            out += struct.pack('<HHHHQ', typ, ver, compat, prio, tid)
            for seg in (front, middle, data):
                out += struct.pack('<I', len(seg)) + seg
    open(sys.argv[2], 'wb').write(out)
    print('wrote', len(out), 'bytes', {t: min(len(v), KEEP[t]) for t, v in found.items()})


if __name__ == '__main__':
    main()
