#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-3.0-or-later
"""Write N objects with contents derived from their names, or read them back and check them byte-exact.

usage: split_objects.py CEPH_CONF POOL write N | split_objects.py CEPH_CONF POOL verify N
"""
import hashlib
import sys

import rados
from radosconn import connect


def content(i):
    name = f"split-{i}"
    seed = hashlib.sha256(name.encode()).digest()
    size = 1 + (i * 7919) % 65536
    return name, (seed * (size // len(seed) + 1))[:size]


conf, pool, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
_, (io,) = connect(conf, pool)
if mode == "write":
    done = []
    for i in range(n):
        name, data = content(i)
        done.append(io.aio_write_full(name, data))
        if len(done) >= 16:
            done.pop(0).wait_for_complete()
    for c in done:
        c.wait_for_complete()
    for i in range(n):
        name, data = content(i)
        if io.stat(name)[0] != len(data):
            print(f"BAD SIZE {name}", file=sys.stderr)
            sys.exit(1)
    print(f"wrote {n}")
else:
    bad = 0
    for i in range(n):
        name, data = content(i)
        try:
            got = io.read(name, len(data) + 1)
        except rados.ObjectNotFound:
            got = None
        if got != data:
            bad += 1
            print(f"MISMATCH {name}: got {None if got is None else len(got)} bytes", file=sys.stderr)
    print(f"verified {n} objects, {bad} bad", flush=True)
    sys.exit(1 if bad else 0)
