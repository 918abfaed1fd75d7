#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-3.0-or-later
"""Scatter an object's blocks with overwrites, then read it whole a few times; exit 0 when every read returns
what was written (the OSD may rewrite the scattered blocks as one run between the reads: defragment on read).

usage: scattered_read.py CEPH_CONF POOL
"""
import random
import sys

from radosconn import connect

conf, pool = sys.argv[1], sys.argv[2]
SIZE = 400 << 10
PIECE = 20 << 10  # above the 16 KiB that ferro-osd may journal: written straight to fresh blocks
rng = random.Random(7)

_, (io,) = connect(conf, pool)
want = bytearray(rng.randbytes(SIZE))
io.write_full("scattered", bytes(want))
# Every other piece overwritten, with a write to another object in between: the fresh blocks are not adjacent.
for off in range(0, SIZE, 2 * PIECE):
    piece = rng.randbytes(PIECE)
    io.write("scattered", piece, off)
    want[off:off + PIECE] = piece
    io.write("scattered-neighbour", rng.randbytes(PIECE), off)
for i in range(3):
    got = io.read("scattered", SIZE, 0)
    if got != bytes(want):
        print(f"FAILED: read {i} returned other bytes", file=sys.stderr)
        sys.exit(1)
# Partial reads across the pieces too.
for off, n in ((PIECE // 2, 3 * PIECE), (SIZE - PIECE - 5, PIECE + 5)):
    if io.read("scattered", n, off) != bytes(want[off:off + n]):
        print(f"FAILED: read of {n} at {off}", file=sys.stderr)
        sys.exit(1)
io.remove_object("scattered-neighbour")
print("ok: 5 reads of a scattered object")
