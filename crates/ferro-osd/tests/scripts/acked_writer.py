#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-3.0-or-later
"""Write objects for SECONDS seconds (up to 8 in flight) and print "ack NAME SIZE" for every acknowledged write,
or, with --verify FILE, read back every object FILE lists as acknowledged and check its content.

usage: acked_writer.py CEPH_CONF POOL SECONDS | acked_writer.py CEPH_CONF POOL --verify ACKFILE

FERRO_WRITER_CONF="key=value,..." sets librados options (e.g. objecter_timeout=60).
"""
import os
import hashlib
import sys
import threading
import time

from radosconn import connect


def content(name, size):
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


conf, pool = sys.argv[1], sys.argv[2]
options = dict(kv.split("=", 1) for kv in os.environ.get("FERRO_WRITER_CONF", "").split(",") if "=" in kv)
_, (io,) = connect(conf, pool, options=options)

if sys.argv[3] == "--verify":
    bad = 0
    n = 0
    for line in open(sys.argv[4]):
        parts = line.split()
        if len(parts) != 3 or parts[0] != "ack":
            continue
        name, size = parts[1], int(parts[2])
        n += 1
        data = io.read(name, size + 1)
        if data != content(name, size):
            bad += 1
            print(f"MISMATCH {name}: got {len(data)} bytes", file=sys.stderr)
    print(f"verified {n} acknowledged writes, {bad} bad", flush=True)
    sys.exit(1 if bad or n == 0 else 0)

seconds = float(sys.argv[3])
sem = threading.Semaphore(8)
lock = threading.Lock()
end = time.time() + seconds
i = 0
pending = []
while time.time() < end:
    sem.acquire()
    name = f"obj{i}"
    size = 1 + (i * 7919) % 65536
    i += 1

    def done(comp, name=name, size=size):
        with lock:
            if comp.get_return_value() == 0:
                print(f"ack {name} {size}", flush=True)
        sem.release()

    pending.append(io.aio_write_full(name, content(name, size), oncomplete=done))
for c in pending:
    c.wait_for_complete()
