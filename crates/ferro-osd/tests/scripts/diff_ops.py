#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-3.0-or-later
"""Differential test: one seeded random op sequence applied through python3-rados to two pools (e.g. one on a
classic BlueStore OSD, one on ferro-osd); every result (data, errno, xattrs, omap, listings) must be equal.

usage: diff_ops.py CEPH_CONF POOL_A POOL_B SEED COUNT
"""
import random
import sys

import rados
from radosconn import connect

conf, pa, pb, seed, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
_, ios = connect(conf, pa, pb)
NAMES = [f"d{i}" for i in range(6)]
NSS = ["", "n1"]


def blob(n):
    return bytes(rng.randrange(256) for _ in range(n))


def outcome(fn):
    try:
        r = fn()
        if isinstance(r, (list, tuple)):
            r = list(r)
        return ("ok", r)
    except rados.Error as e:
        return ("err", getattr(e, "errno", str(type(e))))
    except AssertionError as e:
        # python3-rados raises AssertionError where librados returned an unexpected code (e.g. cmpext errors)
        return ("assert", type(e).__name__)


def omap_all(io, name):
    with rados.ReadOpCtx() as op:
        it, _ = io.get_omap_vals(op, "", "", 1000)
        io.operate_read_op(op, name)
        return sorted(it)


def stat_size(io, name):
    return io.stat(name)[0]


def run_op(kind, args):
    res = []
    for io in ios:
        ns, name = args["ns"], args["name"]
        io.set_namespace(ns)
        if kind == "write_full":
            f = lambda: io.write_full(name, args["data"])
        elif kind == "write":
            f = lambda: io.write(name, args["data"], args["off"])
        elif kind == "append":
            f = lambda: io.append(name, args["data"])
        elif kind == "trunc":
            f = lambda: io.trunc(name, args["off"])
        elif kind == "remove":
            f = lambda: io.remove_object(name)
        elif kind == "read":
            f = lambda: io.read(name, args["len"], args["off"])
        elif kind == "stat":
            f = lambda: stat_size(io, name)
        elif kind == "setxattr":
            f = lambda: io.set_xattr(name, args["key"], args["data"])
        elif kind == "rmxattr":
            f = lambda: io.rm_xattr(name, args["key"])
        elif kind == "getxattrs":
            f = lambda: sorted(io.get_xattrs(name))
        elif kind == "setomap":
            def f():
                with rados.WriteOpCtx() as op:
                    io.set_omap(op, (args["key"],), (args["data"],))
                    io.operate_write_op(op, name)
        elif kind == "rmomap":
            def f():
                with rados.WriteOpCtx() as op:
                    io.remove_omap_keys(op, (args["key"],))
                    io.operate_write_op(op, name)
        elif kind == "omap":
            f = lambda: omap_all(io, name)
        elif kind == "create_excl":
            def f():
                with rados.WriteOpCtx() as op:
                    op.new(rados.LIBRADOS_CREATE_EXCLUSIVE)
                    io.operate_write_op(op, name)
        elif kind == "cmpext":
            f = lambda: io.cmpext(name, args["data"], args["off"])
        elif kind == "list":
            f = lambda: sorted(o.key for o in io.list_objects())
        else:
            raise ValueError(kind)
        res.append(outcome(f))
    return res


KINDS = ["write_full", "write", "append", "trunc", "remove", "read", "stat", "setxattr", "rmxattr",
         "getxattrs", "setomap", "rmomap", "omap", "create_excl", "cmpext", "list"]
for i in range(count):
    kind = rng.choice(KINDS)
    size = rng.choice([0, 1, 7, 100, 5000])
    if kind in ("setxattr", "setomap"):
        # Known gap: ferrostore keeps metadata entries (xattrs, omap) up to ~1.3 KiB (B-tree entry limit) and
        # answers E2BIG beyond; BlueStore takes them. Metadata values stay small here until that is lifted.
        size = min(size, 1000)
    args = {
        "ns": rng.choice(NSS),
        "name": rng.choice(NAMES),
        "data": blob(size),
        "off": rng.choice([0, 1, 10, 4096, 5000]),
        "len": rng.choice([0, 1, 50, 8192]),
        "key": rng.choice(["k1", "k2", "user.a", "zz"]),
    }
    a, b = run_op(kind, args)
    if a != b:
        print(f"DIFFERENCE at op {i} ({kind} {args['ns']}/{args['name']}): {pa}={a!r} {pb}={b!r}", file=sys.stderr)
        print(f"replay: diff_ops.py {conf} {pa} {pb} {seed} {count}", file=sys.stderr)
        sys.exit(1)

# Final state of every object.
for ns in NSS:
    for name in NAMES:
        for kind in ["stat", "read", "getxattrs", "omap"]:
            a, b = run_op(kind, {"ns": ns, "name": name, "len": 1 << 20, "off": 0})
            if a != b:
                print(f"FINAL DIFFERENCE {kind} {ns}/{name}: {a!r} vs {b!r}", file=sys.stderr)
                sys.exit(1)
print(f"ok: {count} ops, seed {seed}, no difference")
