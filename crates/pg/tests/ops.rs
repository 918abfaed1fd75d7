// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! The op engine on a simulated device: each op family's return codes and payloads as a Pacific OSD produces
//! them, multi-op atomicity, FAILOK, durable-before-ack, dup detection across a restart, listing order,
//! watch/notify with timeouts, cls lock/version, caps.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use ceph_msgs::osd_op::{
    Extent, MOSDOp, MOSDOpReply, MWatchNotify, OSDOp, cmpxattr, flag, op, op_flag, watch_event, watch_op,
};
use common::osdop::*;
use common::sim;
use denc::{
    Decode, Decoder, Encoder, EntityAddr, EntityNameT, Eversion, HObject, ObjectLocator, ObjectName, PgId,
    ShardId, SnapId, SpgId, Utime,
};
use ferrostore::{Event, SimConfig, SimDevice, Store};
use osd_types::{ObjListWatchResponse, PgNlsResponse};
use pg::{ConnId, OpContext, OsdCap, Outputs, Pg, PgConfig, PoolInfo};

const EPOCH: u32 = 7;
const ENOENT: i32 = -2;

fn pool() -> PoolInfo {
    sim::pool(3, "data", 1)
}

fn spgid() -> SpgId {
    sim::spgid(3)
}

fn new_store() -> Store<SimDevice> {
    sim::sim_store(16 << 20, 1 << 20, 5, sim::sim(11, true, 3, false))
}

struct H {
    store: Store<SimDevice>,
    pg: Pg,
    caps: OsdCap,
    tid: u64,
    now: Utime,
    /// Watch-notify messages seen so far, per connection.
    notifies: Vec<(ConnId, MWatchNotify)>,
}

impl H {
    fn new() -> H {
        let mut store = new_store();
        let pg = sim::created_pg(&mut store, pool(), PgConfig::default(), EPOCH);
        H {
            store,
            pg,
            caps: OsdCap::allow_all(),
            tid: 0,
            now: Utime::new(1_700_000_000, 0),
            notifies: Vec::new(),
        }
    }

    fn msg(&mut self, oid: &str, nspace: &str, ops: Vec<OSDOp>) -> MOSDOp {
        self.tid += 1;
        let mut flags = flag::ACK | flag::ONDISK;
        if ops.iter().any(|o| op::is_write(o.op)) {
            flags |= flag::WRITE;
        } else {
            flags |= flag::READ;
        }
        MOSDOp {
            tid: self.tid,
            pgid: spgid(),
            hash: name_hash(oid),
            osdmap_epoch: EPOCH,
            flags,
            client_inc: 0,
            mtime: Utime::new(1_650_000_000, 5),
            oloc: ObjectLocator {
                pool: 3,
                nspace: Bytes::copy_from_slice(nspace.as_bytes()),
                ..Default::default()
            },
            oid: ObjectName::new(Bytes::copy_from_slice(oid.as_bytes())),
            ops,
            snapid: SnapId::NOSNAP,
            retry_attempt: 0,
            features: u64::MAX,
            ..Default::default()
        }
    }

    /// Hand `m` to the PG as `client` on `conn`; drive the store until the reply is out; return it.
    fn send_as(&mut self, m: MOSDOp, conn: u64, client: i64) -> MOSDOpReply {
        let caps = self.caps.clone();
        let ctx = OpContext {
            msg: m.clone(),
            conn: ConnId(conn),
            client: EntityNameT::client(client),
            client_addr: "v2:10.0.0.9:0/123".parse::<EntityAddr>().unwrap(),
            caps: &caps,
            conn_features: u64::MAX,
            epoch: EPOCH,
            now: self.now,
        };
        let out = self.pg.handle_op(&mut self.store, ctx);
        let mut replies = self.take(out);
        while replies.is_empty() {
            assert!(self.pg.held_replies() > 0, "no reply and nothing held");
            let mut ev = Vec::new();
            self.store.wait(&mut ev).unwrap();
            for e in ev {
                if let Event::Durable(s) = e {
                    let out = self.pg.on_commit(s);
                    replies.extend(self.take(out));
                }
            }
        }
        assert_eq!(replies.len(), 1);
        let (c, r) = replies.pop().unwrap();
        assert_eq!(c, ConnId(conn));
        assert_eq!(r.tid, m.tid);
        // replies survive the wire
        MOSDOpReply::decode_message(&r.encode_message(u64::MAX)).unwrap()
    }

    fn take(&mut self, out: Outputs) -> Vec<(ConnId, MOSDOpReply)> {
        self.notifies.extend(out.notifies);
        out.replies
    }

    fn send(&mut self, m: MOSDOp) -> MOSDOpReply {
        self.send_as(m, 1, 4100)
    }

    fn run(&mut self, oid: &str, ops: Vec<OSDOp>) -> MOSDOpReply {
        let m = self.msg(oid, "", ops);
        self.send(m)
    }

    fn drain(&mut self) {
        while self.store.unacked() > 0 {
            let mut ev = Vec::new();
            self.store.wait(&mut ev).unwrap();
            for e in ev {
                if let Event::Durable(s) = e {
                    let out = self.pg.on_commit(s);
                    assert!(out.replies.is_empty());
                }
            }
        }
    }
}

#[test]
fn write_read_stat_and_versions() {
    let mut h = H::new();
    let r = h.run("a", vec![write(0, b"hello world")]);
    assert_eq!(r.result, 0);
    assert_eq!(r.replay_version, Eversion::new(EPOCH, 1));
    assert_eq!(r.user_version, 1);
    assert_eq!(r.bad_replay_version, Eversion::new(EPOCH, 1));
    assert_eq!(
        r.flags & i64::from(flag::ONDISK | flag::ACK),
        i64::from(flag::ONDISK | flag::ACK)
    );
    assert!(r.ops[0].outdata.is_empty());

    let r = h.run("a", vec![read(6, 0)]);
    assert_eq!(r.result, 0);
    assert_eq!(&r.ops[0].outdata[..], b"world");
    assert_eq!(r.ops[0].extent().length, 5);
    assert_eq!((r.replay_version, r.user_version), (Eversion::default(), 1));
    assert_eq!(r.bad_replay_version, Eversion::new(0, 1));

    // a read past the end returns nothing, successfully
    let r = h.run("a", vec![read(100, 10)]);
    assert_eq!((r.result, r.ops[0].outdata.len()), (0, 0));

    let r = h.run("a", vec![OSDOp::new(op::STAT)]);
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    assert_eq!(d.u64().unwrap(), 11);
    assert_eq!(Utime::decode(&mut d).unwrap(), Utime::new(1_650_000_000, 5));

    // a second write: version 2, user version 2
    let r = h.run("a", vec![write(11, b"!")]);
    assert_eq!((r.replay_version, r.user_version), (Eversion::new(EPOCH, 2), 2));

    // absent objects: ENOENT with no versions
    let r = h.run("nope", vec![read(0, 0)]);
    assert_eq!(r.result, ENOENT);
    assert_eq!(
        (r.replay_version, r.user_version, r.bad_replay_version),
        (Eversion::default(), 0, Eversion::default())
    );
    let r = h.run("nope", vec![OSDOp::new(op::STAT)]);
    assert_eq!(r.result, ENOENT);
    assert_eq!(h.pg.stats().num_objects, 1);
    assert_eq!(h.pg.stats().num_bytes, 12);
}

#[test]
fn data_ops() {
    let mut h = H::new();
    h.run("o", vec![writefull(b"0123456789")]);
    // writefull shrinks
    h.run("o", vec![writefull(b"abc")]);
    assert_eq!(&h.run("o", vec![read(0, 0)]).ops[0].outdata[..], b"abc");
    // append
    let ap = OSDOp::new(op::APPEND).with_extent(0, 3).with_indata(&b"def"[..]);
    assert_eq!(h.run("o", vec![ap]).result, 0);
    assert_eq!(&h.run("o", vec![read(0, 0)]).ops[0].outdata[..], b"abcdef");
    // zero in the middle leaves the size; zero to the end truncates
    h.run("o", vec![OSDOp::new(op::ZERO).with_extent(1, 2)]);
    assert_eq!(&h.run("o", vec![read(0, 0)]).ops[0].outdata[..], b"a\0\0def");
    h.run("o", vec![OSDOp::new(op::ZERO).with_extent(4, 100)]);
    assert_eq!(&h.run("o", vec![read(0, 0)]).ops[0].outdata[..], b"a\0\0d");
    // truncate up extends with zeros
    h.run("o", vec![OSDOp::new(op::TRUNCATE).with_extent(6, 0)]);
    assert_eq!(&h.run("o", vec![read(0, 0)]).ops[0].outdata[..], b"a\0\0d\0\0");
    // write with a hole
    h.run("o", vec![write(8, b"z")]);
    assert_eq!(h.run("o", vec![read(0, 0)]).ops[0].outdata.len(), 9);
    // sparse read: extent map + data
    let r = h.run("o", vec![OSDOp::new(op::SPARSE_READ).with_extent(0, 9)]);
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    let m: BTreeMap<u64, u64> = d.decode().unwrap();
    let data = d.bufferlist().unwrap();
    assert_eq!(m.values().sum::<u64>(), data.len() as u64);
    // cmpext: equal prefix succeeds, a mismatch at byte 3 gives -MAX_ERRNO-3
    let r = h.run(
        "o",
        vec![
            OSDOp::new(op::CMPEXT)
                .with_extent(0, 4)
                .with_indata(&b"a\0\0d"[..]),
        ],
    );
    assert_eq!(r.result, 0);
    let r = h.run(
        "o",
        vec![
            OSDOp::new(op::CMPEXT)
                .with_extent(0, 4)
                .with_indata(&b"a\0\0x"[..]),
        ],
    );
    assert_eq!(r.result, -4095 - 3);
    // exclusive create of an existing object
    let r = h.run("o", vec![OSDOp::new(op::CREATE).with_flags(op_flag::EXCL)]);
    assert_eq!(r.result, -17);
    let r = h.run("o", vec![OSDOp::new(op::CREATE)]);
    assert_eq!(r.result, 0);
    // create makes an empty object
    assert_eq!(
        h.run("new", vec![OSDOp::new(op::CREATE).with_flags(op_flag::EXCL)])
            .result,
        0
    );
    assert_eq!(h.run("new", vec![OSDOp::new(op::STAT)]).result, 0);
    // delete, then it is gone; deleting again is ENOENT with the floor versions
    assert_eq!(h.run("o", vec![OSDOp::new(op::DELETE)]).result, 0);
    assert_eq!(h.run("o", vec![OSDOp::new(op::STAT)]).result, ENOENT);
    let head = h.pg.stats().last_update;
    let r = h.run("o", vec![OSDOp::new(op::DELETE)]);
    assert_eq!(r.result, ENOENT);
    assert_eq!(r.bad_replay_version, head);
    assert_eq!(r.replay_version, Eversion::default());
    // the failed delete was logged (for dup detection) and took a version
    assert_eq!(h.pg.stats().last_update.version, head.version + 1);
    // mismatched write length
    let bad = OSDOp::new(op::WRITE).with_extent(0, 5).with_indata(&b"abc"[..]);
    assert_eq!(h.run("x", vec![bad]).result, -22);
    // writes beyond the max object size
    assert_eq!(h.run("x", vec![write(200 << 20, b"a")]).result, -27);
    // asserts on the user version
    let uv = h.run("new", vec![OSDOp::new(op::STAT)]).user_version;
    let mut av = OSDOp::new(op::ASSERT_VER);
    av.set_assert_ver(uv);
    assert_eq!(h.run("new", vec![av.clone()]).result, 0);
    av.set_assert_ver(uv + 1);
    assert_eq!(h.run("new", vec![av.clone()]).result, -75);
    av.set_assert_ver(uv - 1);
    assert_eq!(h.run("new", vec![av]).result, -34);
    // unknown ops
    assert_eq!(h.run("new", vec![OSDOp::new(op::TMAPGET)]).result, -95);
}

#[test]
fn xattrs() {
    let mut h = H::new();
    assert_eq!(
        h.run("o", vec![xattr_op(op::SETXATTR, "color", b"blue")]).result,
        0
    );
    h.run("o", vec![xattr_op(op::SETXATTR, "n", b"42")]);
    let r = h.run("o", vec![xattr_op(op::GETXATTR, "color", b"")]);
    assert_eq!(
        (&r.ops[0].outdata[..], r.ops[0].xattr().value_len),
        (&b"blue"[..], 4)
    );
    assert_eq!(h.run("o", vec![xattr_op(op::GETXATTR, "none", b"")]).result, -61);
    // getxattrs: only user attrs, without the prefix (not "_" = object_info_t, not "snapset")
    let r = h.run("o", vec![OSDOp::new(op::GETXATTRS)]);
    let m: BTreeMap<Bytes, Bytes> = BTreeMap::decode_all(r.ops[0].outdata.clone()).unwrap();
    assert_eq!(
        m.keys().map(|k| &k[..]).collect::<Vec<_>>(),
        [&b"color"[..], b"n"]
    );
    // classic storage: "_color", "_" (object_info_t) and "snapset" in the store
    let stored = h
        .store
        .getattrs(
            h.pg.collection(),
            &pg::keys::object_key(
                &HObject::new("o", "", SnapId::NOSNAP, name_hash("o"), 3, ""),
                &spgid(),
            ),
        )
        .unwrap();
    let names: Vec<&[u8]> = stored.iter().map(|(k, _)| &k[..]).collect();
    assert_eq!(names, [&b"_"[..], b"_color", b"_n", b"snapset"]);
    let oi = osd_types::ObjectInfo::decode_all(stored[0].1.clone()).unwrap();
    assert_eq!(oi.soid.oid.as_bytes(), b"o");
    assert_eq!(oi.user_version, 2);
    // cmpxattr
    assert_eq!(
        h.run(
            "o",
            vec![cmpxattr_op(
                "color",
                b"blue",
                cmpxattr::OP_EQ,
                cmpxattr::MODE_STRING
            )]
        )
        .result,
        0
    );
    assert_eq!(
        h.run(
            "o",
            vec![cmpxattr_op(
                "color",
                b"red",
                cmpxattr::OP_EQ,
                cmpxattr::MODE_STRING
            )]
        )
        .result,
        -125
    );
    assert_eq!(
        h.run(
            "o",
            vec![cmpxattr_op("color", b"c", cmpxattr::OP_GT, cmpxattr::MODE_STRING)]
        )
        .result,
        0
    );
    let v = 41u64.to_le_bytes();
    assert_eq!(
        h.run(
            "o",
            vec![cmpxattr_op("n", &v, cmpxattr::OP_LT, cmpxattr::MODE_U64)]
        )
        .result,
        0
    );
    assert_eq!(
        h.run(
            "o",
            vec![cmpxattr_op("n", &v, cmpxattr::OP_GTE, cmpxattr::MODE_U64)]
        )
        .result,
        -125
    );
    assert_eq!(
        h.run("o", vec![cmpxattr_op("n", &v, cmpxattr::OP_EQ, 9)]).result,
        -22
    );
    // rmxattr (of a missing attr too, as BlueStore allows)
    assert_eq!(h.run("o", vec![xattr_op(op::RMXATTR, "color", b"")]).result, 0);
    assert_eq!(h.run("o", vec![xattr_op(op::RMXATTR, "color", b"")]).result, 0);
    assert_eq!(h.run("o", vec![xattr_op(op::GETXATTR, "color", b"")]).result, -61);
    assert_eq!(
        h.run("absent", vec![xattr_op(op::RMXATTR, "color", b"")]).result,
        ENOENT
    );
}

fn decode_vals(b: &Bytes) -> (Vec<(String, String)>, bool) {
    let mut d = Decoder::new(b.clone());
    let n = d.u32().unwrap();
    let v = (0..n)
        .map(|_| {
            (
                d.string().unwrap(),
                String::from_utf8(d.bufferlist().unwrap().to_vec()).unwrap(),
            )
        })
        .collect();
    (v, d.bool().unwrap())
}

#[test]
fn omap() {
    let mut h = H::new();
    assert_eq!(
        h.run(
            "o",
            vec![omap_set(&[("a", "1"), ("b1", "2"), ("b2", "3"), ("c", "4")])]
        )
        .result,
        0
    );
    let r = h.run("o", vec![omap_get_vals("", 2, "")]);
    assert_eq!(
        decode_vals(&r.ops[0].outdata),
        (vec![("a".into(), "1".into()), ("b1".into(), "2".into())], true)
    );
    let r = h.run("o", vec![omap_get_vals("a", 10, "b")]);
    assert_eq!(
        decode_vals(&r.ops[0].outdata),
        (vec![("b1".into(), "2".into()), ("b2".into(), "3".into())], false)
    );
    let r = h.run("o", vec![omap_get_vals("b1", 10, "")]);
    assert_eq!(decode_vals(&r.ops[0].outdata).0.len(), 2);
    // keys
    let mut e = Encoder::new(0);
    e.string("b2");
    e.u64(5);
    let r = h.run("o", vec![OSDOp::new(op::OMAPGETKEYS).with_indata(e.into_bytes())]);
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    assert_eq!(d.u32().unwrap(), 1);
    assert_eq!(d.string().unwrap(), "c");
    assert!(!d.bool().unwrap());
    // by keys
    let want: std::collections::BTreeSet<Bytes> =
        [Bytes::from_static(b"a"), Bytes::from_static(b"zz")].into();
    let r = h.run(
        "o",
        vec![OSDOp::new(op::OMAPGETVALSBYKEYS).with_indata(enc(&want))],
    );
    let got: BTreeMap<Bytes, Bytes> = BTreeMap::decode_all(r.ops[0].outdata.clone()).unwrap();
    assert_eq!(got.len(), 1);
    // header
    h.run("o", vec![OSDOp::new(op::OMAPSETHEADER).with_indata(&b"hdr"[..])]);
    assert_eq!(
        &h.run("o", vec![OSDOp::new(op::OMAPGETHEADER)]).ops[0].outdata[..],
        b"hdr"
    );
    // omap_cmp
    let mut asserts: BTreeMap<Bytes, (Bytes, i32)> = BTreeMap::new();
    asserts.insert(Bytes::from_static(b"a"), (Bytes::from_static(b"1"), 1));
    assert_eq!(
        h.run("o", vec![OSDOp::new(op::OMAP_CMP).with_indata(enc(&asserts))])
            .result,
        0
    );
    asserts.insert(Bytes::from_static(b"c"), (Bytes::from_static(b"3"), 5)); // "4" < "3" is false
    assert_eq!(
        h.run("o", vec![OSDOp::new(op::OMAP_CMP).with_indata(enc(&asserts))])
            .result,
        -125
    );
    // rm keys, rm range
    let rm: std::collections::BTreeSet<Bytes> = [Bytes::from_static(b"a")].into();
    h.run("o", vec![OSDOp::new(op::OMAPRMKEYS).with_indata(enc(&rm))]);
    let mut e = Encoder::new(0);
    e.string("b");
    e.string("b2");
    h.run(
        "o",
        vec![OSDOp::new(op::OMAPRMKEYRANGE).with_indata(e.into_bytes())],
    );
    let r = h.run("o", vec![omap_get_vals("", 100, "")]);
    assert_eq!(
        decode_vals(&r.ops[0].outdata).0,
        vec![("b2".into(), "3".into()), ("c".into(), "4".into())]
    );
    assert_eq!(h.pg.stats().num_omap_objects, 1);
    // clear removes keys and header
    h.run("o", vec![OSDOp::new(op::OMAPCLEAR)]);
    assert_eq!(h.pg.stats().num_omap_objects, 0);
    let r = h.run(
        "o",
        vec![omap_get_vals("", 100, ""), OSDOp::new(op::OMAPGETHEADER)],
    );
    assert_eq!(decode_vals(&r.ops[0].outdata).0.len(), 0);
    assert!(r.ops[1].outdata.is_empty());
    assert_eq!(h.run("absent", vec![OSDOp::new(op::OMAPCLEAR)]).result, ENOENT);
}

#[test]
fn multi_op_is_all_or_nothing_and_failok_continues() {
    let mut h = H::new();
    // write + setxattr + failing cmpxattr: nothing happens
    let r = h.run(
        "t",
        vec![
            write(0, b"data"),
            xattr_op(op::SETXATTR, "k", b"v"),
            cmpxattr_op("k", b"v", cmpxattr::OP_EQ, cmpxattr::MODE_STRING),
        ],
    );
    // the cmpxattr reads the object as it was before the op: it does not exist yet → ENOENT, as in Ceph
    assert_eq!(r.result, ENOENT);
    assert_eq!(r.ops[2].rval, ENOENT);
    // on an existing object the failing compare cancels the whole op
    h.run("u", vec![write(0, b"old")]);
    let r = h.run(
        "u",
        vec![
            write(0, b"new"),
            xattr_op(op::SETXATTR, "k", b"v"),
            cmpxattr_op("k", b"v", cmpxattr::OP_EQ, cmpxattr::MODE_STRING),
        ],
    );
    assert_eq!(r.result, -125);
    assert_eq!(&h.run("u", vec![read(0, 0)]).ops[0].outdata[..], b"old");
    assert_eq!(h.run("u", vec![xattr_op(op::GETXATTR, "k", b"")]).result, -61);
    h.run("u", vec![OSDOp::new(op::DELETE)]);
    assert_eq!(h.run("t", vec![OSDOp::new(op::STAT)]).result, ENOENT);
    assert_eq!(h.pg.stats().num_objects, 0);
    // FAILOK: a failing op does not stop the others
    let r = h.run(
        "t",
        vec![
            write(0, b"data"),
            xattr_op(op::GETXATTR, "missing", b"").with_flags(op_flag::FAILOK),
            xattr_op(op::SETXATTR, "k", b"v"),
        ],
    );
    assert_eq!(r.result, 0);
    assert_eq!(r.ops[1].rval, ENOENT);
    assert_eq!(
        &h.run("t", vec![xattr_op(op::GETXATTR, "k", b"")]).ops[0].outdata[..],
        b"v"
    );
    // a read op with a FAILOK failure succeeds and returns the other ops' data
    let r = h.run(
        "t",
        vec![
            xattr_op(op::GETXATTR, "nope", b"").with_flags(op_flag::FAILOK),
            read(0, 2),
        ],
    );
    assert_eq!(
        (r.result, r.ops[0].rval, &r.ops[1].outdata[..]),
        (0, -61, &b"da"[..])
    );
    // without FAILOK the read op fails with the op's error
    let r = h.run("t", vec![read(0, 2), xattr_op(op::GETXATTR, "nope", b"")]);
    assert_eq!(r.result, -61);
}

#[test]
fn replies_wait_for_durability() {
    let mut h = H::new();
    let m = h.msg("d", "", vec![write(0, b"x")]);
    let caps = OsdCap::allow_all();
    let ctx = OpContext {
        msg: m,
        conn: ConnId(1),
        client: EntityNameT::client(1),
        client_addr: EntityAddr::default(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH,
        now: h.now,
    };
    let out = h.pg.handle_op(&mut h.store, ctx);
    assert!(
        out.replies.is_empty(),
        "a write is acknowledged only once durable"
    );
    assert_eq!(h.pg.held_replies(), 1);
    // a read of the same object waits behind it
    let m = h.msg("d", "", vec![read(0, 0)]);
    let ctx = OpContext {
        msg: m,
        conn: ConnId(2),
        client: EntityNameT::client(1),
        client_addr: EntityAddr::default(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH,
        now: h.now,
    };
    let out = h.pg.handle_op(&mut h.store, ctx);
    assert!(out.replies.is_empty());
    assert_eq!(h.pg.held_replies(), 2);
    let mut got = Vec::new();
    while got.len() < 2 {
        let mut ev = Vec::new();
        h.store.wait(&mut ev).unwrap();
        for e in ev {
            if let Event::Durable(s) = e {
                got.extend(h.pg.on_commit(s).replies);
            }
        }
    }
    // in order: the write's ack, then the read with the written data
    assert_eq!(got[0].0, ConnId(1));
    assert_eq!(got[1].0, ConnId(2));
    assert_eq!(&got[1].1.ops[0].outdata[..], b"x");
    assert_eq!(h.pg.held_replies(), 0);
}

#[test]
fn resent_requests_get_the_original_result() {
    let mut h = H::new();
    let m = h.msg("dup", "", vec![write(0, b"once")]);
    let first = h.send(m.clone());
    h.run("dup", vec![write(4, b"more")]);
    let mut again = m.clone();
    again.flags |= flag::RETRY;
    again.retry_attempt = 1;
    let second = h.send(again.clone());
    assert_eq!(
        (second.result, second.replay_version, second.user_version),
        (0, first.replay_version, first.user_version)
    );
    // not applied twice
    assert_eq!(&h.run("dup", vec![read(0, 0)]).ops[0].outdata[..], b"oncemore");
    // another client with the same tid is a different request
    let other = h.send_as(m.clone(), 2, 4200);
    assert_ne!(other.replay_version, first.replay_version);
    // failed writes are remembered too
    let del = h.msg("ghost", "", vec![OSDOp::new(op::DELETE)]);
    let r1 = h.send(del.clone());
    assert_eq!(r1.result, ENOENT);
    let r2 = h.send(del.clone());
    assert_eq!(r2.result, ENOENT);
    assert_eq!(
        h.pg.stats().last_update.version,
        4,
        "the resend is not executed again"
    );

    // after a restart (remount + load), the log still answers
    h.drain();
    sim::remount(&mut h.store);
    h.pg = sim::loaded_pg(&mut h.store, pool(), PgConfig::default());
    assert_eq!(h.pg.stats().num_objects, 1);
    assert_eq!(h.pg.stats().num_bytes, 8);
    let third = h.send(again);
    assert_eq!(
        (third.result, third.replay_version, third.user_version),
        (0, first.replay_version, first.user_version)
    );
    let r = h.run("dup", vec![write(0, b"O")]);
    assert_eq!(r.replay_version, Eversion::new(EPOCH, 5));
}

#[test]
fn log_trims_into_dups() {
    let mut store = new_store();
    let cfg = PgConfig {
        osd_min_pg_log_entries: 3,
        osd_max_pg_log_entries: 5,
        osd_pg_log_dups_tracked: 4,
        ..Default::default()
    };
    let mut pg = Pg::new(spgid(), pool(), cfg);
    let seq = pg.create(&mut store, EPOCH).unwrap();
    store.wait_durable(seq).unwrap();
    let mut h = H {
        store,
        pg,
        caps: OsdCap::allow_all(),
        tid: 0,
        now: Utime::new(1, 0),
        notifies: vec![],
    };
    let first = h.msg("o", "", vec![write(0, b"a")]);
    let r1 = h.send(first.clone());
    for i in 0..5 {
        h.run("o", vec![write(i, b"b")]);
    }
    assert!(h.pg.stats().log_size <= 5);
    // the first request is only a dup now, and still answered
    let r = h.send(first);
    assert_eq!(r.replay_version, r1.replay_version);
}

fn pgnls(h: &mut H, nspace: &[u8], count: u64, handle: &HObject) -> (i32, PgNlsResponse) {
    let mut o = OSDOp::new(op::PGNLS).with_indata(enc(handle));
    o.set_pgls(count, EPOCH);
    let mut m = h.msg("", "", vec![o]);
    m.oloc.nspace = Bytes::copy_from_slice(nspace);
    m.flags = flag::READ | flag::PGOP | flag::ACK | flag::ONDISK;
    let r = h.send(m);
    (
        r.result,
        PgNlsResponse::decode_all(r.ops[0].outdata.clone()).unwrap(),
    )
}

#[test]
fn listing_is_in_hash_order_with_namespaces_and_cursors() {
    let mut h = H::new();
    let names: Vec<String> = (0..23).map(|i| format!("obj{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        let ns = if i % 3 == 0 { "ns1" } else { "" };
        let m = h.msg(n, ns, vec![write(0, b"x")]);
        h.send(m);
    }
    // all namespaces, 5 at a time
    let mut handle = HObject::default();
    let mut seen = Vec::new();
    loop {
        let (res, resp) = pgnls(&mut h, b"\x01", 5, &handle);
        assert!(resp.entries.len() <= 5);
        seen.extend(resp.entries.iter().map(|e| (e.nspace.clone(), e.oid.clone())));
        handle = resp.handle;
        if res == 1 {
            assert!(handle.is_max(), "the end of the only PG is the max object");
            break;
        }
        assert_eq!(res, 0);
    }
    assert_eq!(seen.len(), 23);
    // Ceph's order: by (pool, bit-reversed hash, namespace, key, name)
    let mut want: Vec<HObject> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            HObject::new(
                n.clone(),
                "",
                SnapId::NOSNAP,
                name_hash(n),
                3,
                if i % 3 == 0 { "ns1" } else { "" },
            )
        })
        .collect();
    want.sort();
    let want: Vec<(Bytes, Bytes)> = want.iter().map(|o| (o.nspace.clone(), o.oid.0.clone())).collect();
    assert_eq!(seen, want);
    // one namespace
    let (res, resp) = pgnls(&mut h, b"ns1", 100, &HObject::default());
    assert_eq!(res, 1);
    assert_eq!(resp.entries.len(), 8);
    assert!(resp.entries.iter().all(|e| &e.nspace[..] == b"ns1"));
    let (_, resp) = pgnls(&mut h, b"", 100, &HObject::default());
    assert_eq!(resp.entries.len(), 15);
}

#[test]
fn watch_notify_ack_and_timeouts() {
    let mut h = H::new();
    h.run("w", vec![write(0, b"x")]);
    // client.10 on conn 10 watches
    let m = h.msg("w", "", vec![watch_op_(77, watch_op::WATCH, 30)]);
    let r = h.send_as(m, 10, 10);
    assert_eq!(r.result, 0);
    // watch ops do not change the user version
    assert_eq!(r.user_version, 1);
    assert_eq!(r.replay_version, Eversion::new(EPOCH, 2));
    let r = h.run("w", vec![OSDOp::new(op::LIST_WATCHERS)]);
    let lw = ObjListWatchResponse::decode_all(r.ops[0].outdata.clone()).unwrap();
    assert_eq!(lw.entries.len(), 1);
    assert_eq!(
        (
            lw.entries[0].cookie,
            lw.entries[0].name,
            lw.entries[0].timeout_seconds
        ),
        (77, EntityNameT::client(10), 30)
    );

    // client.20 on conn 20 notifies
    let mut e = Encoder::new(0);
    e.u32(1);
    e.u32(5); // timeout
    e.bytes(b"ping!");
    let mut n = OSDOp::new(op::NOTIFY).with_indata(e.into_bytes());
    n.set_notify_cookie(555);
    let m = h.msg("w", "", vec![n.clone()]);
    let r = h.send_as(m, 20, 20);
    assert_eq!(r.result, 0);
    let notify_id = u64::decode_all(r.ops[0].outdata.clone()).unwrap();
    let to_watcher: Vec<_> = h.notifies.drain(..).collect();
    assert_eq!(to_watcher.len(), 1);
    let (c, msg) = &to_watcher[0];
    assert_eq!(
        (*c, msg.opcode, msg.cookie, msg.notify_id, &msg.bl[..]),
        (ConnId(10), watch_event::NOTIFY, 77, notify_id, &b"ping!"[..])
    );
    assert_eq!(msg.notifier_gid, 20);

    // the watcher acks with a reply: the notifier gets NOTIFY_COMPLETE with it
    let mut e = Encoder::new(0);
    e.u64(notify_id);
    e.u64(77);
    e.bytes(b"pong");
    let m = h.msg(
        "w",
        "",
        vec![OSDOp::new(op::NOTIFY_ACK).with_indata(e.into_bytes())],
    );
    assert_eq!(h.send_as(m, 10, 10).result, 0);
    let done: Vec<_> = h.notifies.drain(..).collect();
    assert_eq!(done.len(), 1);
    let (c, msg) = &done[0];
    assert_eq!(
        (*c, msg.opcode, msg.cookie, msg.return_code),
        (ConnId(20), watch_event::NOTIFY_COMPLETE, 555, 0)
    );
    let mut d = Decoder::new(msg.data.clone());
    let replies: BTreeMap<(u64, u64), Bytes> = d.decode().unwrap();
    let missed: Vec<(u64, u64)> = d.decode().unwrap();
    assert_eq!(replies.get(&(10, 77)).map(|b| &b[..]), Some(&b"pong"[..]));
    assert!(missed.is_empty());

    // a notify nobody acks times out after its 5 s with the watcher listed as missed
    let m = h.msg("w", "", vec![n]);
    h.send_as(m, 20, 20);
    h.notifies.clear();
    let deadline = h.pg.poll_timeout().unwrap();
    assert_eq!(deadline, Utime::new(h.now.sec + 5, 0));
    let out = h.pg.handle_timeout(&mut h.store, deadline);
    assert_eq!(out.notifies.len(), 1);
    let msg = &out.notifies[0].1;
    assert_eq!(
        (msg.opcode, msg.return_code),
        (watch_event::NOTIFY_COMPLETE, -110)
    );
    let mut d = Decoder::new(msg.data.clone());
    let _: BTreeMap<(u64, u64), Bytes> = d.decode().unwrap();
    let missed: Vec<(u64, u64)> = d.decode().unwrap();
    assert_eq!(missed, vec![(10, 77)]);

    // pings keep the watch; without them it times out 30 s after the last one and is dropped from the object
    h.now = Utime::new(h.now.sec + 20, 0);
    let m = h.msg("w", "", vec![watch_op_(77, watch_op::PING, 30)]);
    assert_eq!(h.send_as(m, 10, 10).result, 0);
    let deadline = h.pg.poll_timeout().unwrap();
    assert_eq!(deadline, Utime::new(h.now.sec + 30, 0));
    let out = h.pg.handle_timeout(&mut h.store, Utime::new(h.now.sec + 29, 0));
    assert!(out.notifies.is_empty());
    let out = h.pg.handle_timeout(&mut h.store, deadline);
    assert_eq!(
        out.notifies.len(),
        1,
        "the still-connected watcher is told it was disconnected"
    );
    assert_eq!(out.notifies[0].1.opcode, watch_event::DISCONNECT);
    h.drain();
    let r = h.run("w", vec![OSDOp::new(op::LIST_WATCHERS)]);
    assert!(
        ObjListWatchResponse::decode_all(r.ops[0].outdata.clone())
            .unwrap()
            .entries
            .is_empty()
    );
    // a ping for a gone watch: ENOTCONN
    let m = h.msg("w", "", vec![watch_op_(77, watch_op::PING, 30)]);
    assert_eq!(h.send_as(m, 10, 10).result, -107);

    // unwatch, and watching an absent object
    let m = h.msg("w", "", vec![watch_op_(78, watch_op::WATCH, 0)]);
    h.send_as(m, 10, 10);
    let m = h.msg("w", "", vec![watch_op_(78, watch_op::UNWATCH, 0)]);
    assert_eq!(h.send_as(m, 10, 10).result, 0);
    assert!(h.pg.poll_timeout().is_none());
    let m = h.msg("absent", "", vec![watch_op_(1, watch_op::WATCH, 0)]);
    assert_eq!(h.send_as(m, 10, 10).result, ENOENT);
}

fn lock_op(name: &str, ty: u8, cookie: &str, tag: &str, flags: u8) -> Bytes {
    lock_op_for(name, ty, cookie, tag, flags, Utime::default())
}

fn lock_op_for(name: &str, ty: u8, cookie: &str, tag: &str, flags: u8, duration: Utime) -> Bytes {
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.string(name);
        e.u8(ty);
        e.string(cookie);
        e.string(tag);
        e.string("desc");
        e.encode(&duration);
        e.u8(flags);
    });
    e.into_bytes()
}

#[test]
fn cls_lock() {
    let mut h = H::new();
    // lock creates the object; the lock lives in the user xattr "lock.<name>"
    let m = h.msg("l", "", vec![call("lock", "lock", lock_op("L", 1, "c1", "", 0))]);
    assert_eq!(h.send_as(m.clone(), 1, 1).result, 0);
    let mut again = m.clone();
    again.tid = 999;
    assert_eq!(h.send_as(again, 1, 1).result, -17, "same locker again: EEXIST");
    let m2 = h.msg("l", "", vec![call("lock", "lock", lock_op("L", 1, "c2", "", 0))]);
    assert_eq!(h.send_as(m2, 2, 2).result, -16, "another locker: EBUSY");
    let r = h.run("l", vec![OSDOp::new(op::GETXATTRS)]);
    let attrs: BTreeMap<Bytes, Bytes> = BTreeMap::decode_all(r.ops[0].outdata.clone()).unwrap();
    assert!(attrs.contains_key(&Bytes::from_static(b"lock.L")));
    // get_info
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| e.string("L"));
    let r = h.run("l", vec![call("lock", "get_info", e.into_bytes())]);
    assert_eq!(r.result, 0);
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    let (lockers, ty, tag) = d
        .decode_struct("reply", 1, |_, d| {
            let n = d.u32()?;
            let mut v = Vec::new();
            for _ in 0..n {
                let (who, cookie) =
                    d.decode_struct("id", 1, |_, d| Ok((d.decode::<EntityNameT>()?, d.string()?)))?;
                let addr = d.decode_struct("info", 1, |_, d| {
                    d.decode::<Utime>()?;
                    let a = d.decode::<EntityAddr>()?;
                    d.string()?;
                    Ok(a)
                })?;
                v.push((who, cookie, addr.addr_type));
            }
            Ok((v, d.u8()?, d.string()?))
        })
        .unwrap();
    assert_eq!(
        lockers,
        vec![(EntityNameT::client(1), "c1".to_string(), EntityAddr::TYPE_LEGACY)]
    );
    assert_eq!((ty, tag.as_str()), (1, ""));
    // list_locks
    let r = h.run("l", vec![call("lock", "list_locks", Bytes::new())]);
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    let locks = d.decode_struct("r", 1, |_, d| d.decode::<Vec<String>>()).unwrap();
    assert_eq!(locks, vec!["L".to_string()]);
    // assert_locked
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.string("L");
        e.u8(1);
        e.string("c1");
        e.string("");
    });
    let assert_in = e.into_bytes();
    let m = h.msg("l", "", vec![call("lock", "assert_locked", assert_in.clone())]);
    assert_eq!(h.send_as(m, 1, 1).result, 0);
    let m = h.msg("l", "", vec![call("lock", "assert_locked", assert_in)]);
    assert_eq!(h.send_as(m, 2, 2).result, -16);
    // set_cookie
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.string("L");
        e.u8(1);
        e.string("c1");
        e.string("");
        e.string("c9");
    });
    let m = h.msg("l", "", vec![call("lock", "set_cookie", e.into_bytes())]);
    assert_eq!(h.send_as(m, 1, 1).result, 0);
    // unlock with the old cookie: ENOENT; with the new one: ok
    let unlock = |cookie: &str| {
        let mut e = Encoder::new(0);
        e.versioned(1, 1, |e| {
            e.string("L");
            e.string(cookie);
        });
        call("lock", "unlock", e.into_bytes())
    };
    let m = h.msg("l", "", vec![unlock("c1")]);
    assert_eq!(h.send_as(m, 1, 1).result, ENOENT);
    let m = h.msg("l", "", vec![unlock("c9")]);
    assert_eq!(h.send_as(m, 1, 1).result, 0);
    // shared locks from two clients, then break_lock of one
    for (c, who) in [("s1", 1), ("s2", 2)] {
        let m = h.msg("l", "", vec![call("lock", "lock", lock_op("S", 2, c, "t", 0))]);
        assert_eq!(h.send_as(m, who as u64, who).result, 0);
    }
    let m = h.msg("l", "", vec![call("lock", "lock", lock_op("S", 1, "x", "t", 0))]);
    assert_eq!(h.send_as(m, 3, 3).result, -16, "exclusive over shared: EBUSY");
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.string("S");
        e.encode(&EntityNameT::client(2));
        e.string("s2");
    });
    let m = h.msg("l", "", vec![call("lock", "break_lock", e.into_bytes())]);
    assert_eq!(h.send_as(m, 3, 3).result, 0);
    // unknown class / method
    assert_eq!(
        h.run("l", vec![call("rbd", "get_size", Bytes::new())]).result,
        -95
    );
    assert_eq!(h.run("l", vec![call("lock", "nope", Bytes::new())]).result, -95);
    // a class outside osd_class_load_list: open_class refuses it (-EPERM), whatever the caps
    assert_eq!(
        h.run("l", vec![call("nosuchclass", "m", Bytes::new())]).result,
        -1
    );
    assert_eq!(h.run("l", vec![call("2pc_queue", "m", Bytes::new())]).result, -95);
    // a read-only method on an absent object: ENOENT
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| e.string("L"));
    assert_eq!(
        h.run("absent", vec![call("lock", "get_info", e.into_bytes())])
            .result,
        ENOENT
    );
}

#[test]
fn cls_version() {
    let mut h = H::new();
    let read_ver = |h: &mut H| {
        let r = h.run("v", vec![call("version", "read", Bytes::new())]);
        assert_eq!(r.result, 0);
        let mut d = Decoder::new(r.ops[0].outdata.clone());
        d.decode_struct("ret", 1, |_, d| {
            d.decode_struct("objv", 1, |_, d| Ok((d.u64()?, d.string()?)))
        })
        .unwrap()
    };
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.versioned(1, 1, |e| {
            e.u64(0);
            e.string("");
        });
        e.u32(0);
    });
    let inc = e.into_bytes();
    h.run("v", vec![write(0, b"x")]);
    assert_eq!(h.run("v", vec![call("version", "inc", inc.clone())]).result, 0);
    let (ver, tag) = read_ver(&mut h);
    // the first inc creates version 1 with a random tag, then increments it
    assert_eq!(ver, 2);
    assert_eq!(tag.len(), 24);
    // check_conds: EQ with the current version passes; GT 5 fails
    let cond = |v: u64, tag: &str, c: u32| {
        let mut e = Encoder::new(0);
        e.versioned(1, 1, |e| {
            e.versioned(1, 1, |e| {
                e.u64(0);
                e.string("");
            });
            e.u32(1);
            e.versioned(1, 1, |e| {
                e.versioned(1, 1, |e| {
                    e.u64(v);
                    e.string(tag);
                });
                e.u32(c);
            });
        });
        e.into_bytes()
    };
    assert_eq!(
        h.run("v", vec![call("version", "check_conds", cond(2, &tag, 1))])
            .result,
        0
    );
    assert_eq!(
        h.run("v", vec![call("version", "check_conds", cond(5, "", 2))])
            .result,
        -125
    );
    assert_eq!(
        h.run("v", vec![call("version", "inc_conds", cond(1, "", 4))])
            .result,
        -125
    );
    // set
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.versioned(1, 1, |e| {
            e.u64(40);
            e.string("mytag");
        })
    });
    assert_eq!(h.run("v", vec![call("version", "set", e.into_bytes())]).result, 0);
    assert_eq!(read_ver(&mut h), (40, "mytag".to_string()));
}

#[test]
fn caps_are_enforced() {
    let mut h = H::new();
    h.run("c", vec![write(0, b"x")]);
    h.caps = OsdCap::parse("allow r pool=data").unwrap();
    assert_eq!(h.run("c", vec![read(0, 0)]).result, 0);
    let r = h.run("c", vec![write(0, b"y")]);
    assert_eq!(r.result, -1);
    // class calls need x (class-read/class-write)
    assert_eq!(
        h.run("c", vec![call("lock", "list_locks", Bytes::new())]).result,
        -1
    );
    h.caps = OsdCap::parse("allow rw pool=other").unwrap();
    assert_eq!(h.run("c", vec![read(0, 0)]).result, -1);
    h.caps = OsdCap::parse("allow rwx pool=data namespace=ns").unwrap();
    assert_eq!(h.run("c", vec![read(0, 0)]).result, -1);
    let m = h.msg("c", "ns", vec![write(0, b"z")]);
    assert_eq!(h.send(m).result, 0);
}

#[test]
fn extent_helpers_round_trip() {
    let mut o = OSDOp::new(op::READ);
    o.set_extent(Extent {
        offset: 1,
        length: 2,
        truncate_size: 3,
        truncate_seq: 4,
    });
    assert_eq!(o.extent().truncate_seq, 4);
}

#[test]
fn names_flags_and_returnvec() {
    let mut h = H::new();
    // empty names are EINVAL, over-long ones ENAMETOOLONG (also beyond the store's key limit)
    assert_eq!(h.run("", vec![read(0, 0)]).result, -22);
    let long = "n".repeat(300);
    assert_eq!(h.run(&long, vec![write(0, b"x")]).result, -36);
    let huge = "n".repeat(3000);
    assert_eq!(h.run(&huge, vec![read(0, 0)]).result, -36);
    // PARALLELEXEC is not implemented
    let mut m = h.msg("p", "", vec![read(0, 0)]);
    m.flags |= flag::PARALLELEXEC;
    assert_eq!(h.send(m).result, -22);
    // an op without ops has nothing to do: EINVAL
    assert_eq!(h.run("p", vec![]).result, -22);
    // a write to a snapshot is EINVAL
    let mut m = h.msg("p", "", vec![write(0, b"x")]);
    m.snapid = SnapId(4);
    assert_eq!(h.send(m).result, -22);
    // without RETURNVEC a successful write returns no data; with it, per-op data is kept (<= 64 bytes)
    h.run("v", vec![write(0, b"x")]);
    let r = h.run("v", vec![write(1, b"y"), call("version", "read", Bytes::new())]);
    assert_eq!((r.result, r.ops[1].outdata.len()), (0, 0));
    let mut m = h.msg(
        "v",
        "",
        vec![write(1, b"y"), call("version", "read", Bytes::new())],
    );
    m.flags |= flag::RETURNVEC;
    let r = h.send(m.clone());
    assert_eq!(r.result, 0);
    assert!(!r.ops[1].outdata.is_empty());
    // the resend gets the same per-op data from the log
    let r2 = h.send(m);
    assert_eq!(r2.ops[1].outdata, r.ops[1].outdata);
}

#[test]
fn ops_for_other_pgs_are_dropped_and_listing_api() {
    let mut store = new_store();
    let p = PoolInfo { pg_num: 4, ..pool() };
    let sp = SpgId::new(PgId::new(3, 1), ShardId::NO_SHARD);
    let mut pg = Pg::new(sp, p, PgConfig::default());
    let seq = pg.create(&mut store, EPOCH).unwrap();
    store.wait_durable(seq).unwrap();
    pg.on_commit(seq);
    let caps = OsdCap::allow_all();
    let mut mine = Vec::new();
    for i in 0..40u32 {
        let name = format!("x{i}");
        let hash = name_hash(&name);
        let m = MOSDOp {
            tid: u64::from(i) + 1,
            pgid: sp,
            hash,
            osdmap_epoch: EPOCH,
            flags: flag::WRITE | flag::ONDISK,
            oloc: ObjectLocator::new(3),
            oid: ObjectName::new(Bytes::from(name.clone())),
            ops: vec![write(0, b"z")],
            snapid: SnapId::NOSNAP,
            ..Default::default()
        };
        let ctx = OpContext {
            msg: m,
            conn: ConnId(1),
            client: EntityNameT::client(1),
            client_addr: EntityAddr::default(),
            caps: &caps,
            conn_features: u64::MAX,
            epoch: EPOCH,
            now: Utime::new(1, 0),
        };
        let out = pg.handle_op(&mut store, ctx);
        assert!(out.replies.is_empty());
        if hash & 3 == 1 {
            mine.push(HObject::new(name, "", SnapId::NOSNAP, hash, 3, ""));
        } else {
            assert_eq!(pg.held_replies(), mine.len(), "{name} is not in 3.1: dropped");
        }
    }
    while store.unacked() > 0 {
        let mut ev = Vec::new();
        store.wait(&mut ev).unwrap();
        for e in ev {
            if let Event::Durable(s) = e {
                pg.on_commit(s);
            }
        }
    }
    mine.sort();
    let (first, cursor) = pg.list_objects(&mut store, &HObject::default(), 3).unwrap();
    assert_eq!(first, mine[..3.min(mine.len())]);
    let (rest, end) = pg.list_objects(&mut store, &cursor, 100).unwrap();
    assert_eq!([first, rest].concat(), mine);
    assert!(end.is_max());
    assert_eq!(pg.stats().num_objects, mine.len() as u64);
}

#[test]
fn ops_from_before_the_interval_are_dropped() {
    let mut h = H::new();
    h.pg.set_discard_before(EPOCH + 1);
    let m = h.msg("a", "", vec![write(0, b"x")]);
    let caps = OsdCap::allow_all();
    let ctx = OpContext {
        msg: m.clone(),
        conn: ConnId(1),
        client: EntityNameT::client(1),
        client_addr: EntityAddr::default(),
        caps: &caps,
        conn_features: u64::MAX,
        epoch: EPOCH + 1,
        now: h.now,
    };
    let out = h.pg.handle_op(&mut h.store, ctx);
    assert!(out.replies.is_empty() && h.pg.held_replies() == 0);
    let mut m2 = m;
    m2.osdmap_epoch = EPOCH + 1;
    assert_eq!(h.send(m2).result, 0);
}

#[test]
fn pg_is_send() {
    fn send<T: Send>() {}
    send::<Pg>();
    send::<Outputs>();
}

#[test]
fn a_full_store_fails_the_op_and_changes_nothing() {
    let mut store = sim::sim_store(4 << 20, 256 << 10, 6, SimConfig::default());
    let mut pg = Pg::new(spgid(), pool(), PgConfig::default());
    let seq = pg.create(&mut store, EPOCH).unwrap();
    store.wait_durable(seq).unwrap();
    let mut h = H {
        store,
        pg,
        caps: OsdCap::allow_all(),
        tid: 0,
        now: Utime::new(1, 0),
        notifies: vec![],
    };
    let big = vec![7u8; 1 << 20];
    let mut failed = None;
    for i in 0..8 {
        let r = h.run(&format!("big{i}"), vec![writefull(&big)]);
        if r.result < 0 {
            failed = Some((i, r));
            break;
        }
    }
    let (i, r) = failed.expect("a 4 MiB device fills up");
    assert_eq!(r.result, -28);
    let before = h.pg.stats();
    assert_eq!(before.num_objects, i as u64);
    assert_eq!(
        h.run(&format!("big{i}"), vec![OSDOp::new(op::STAT)]).result,
        ENOENT
    );
    // the log did not take a version for the refused transaction
    let r = h.run("small", vec![write(0, b"s")]);
    assert_eq!(r.result, 0);
    assert_eq!(r.replay_version.version, before.last_update.version + 1);
}

#[test]
fn writesame_checksum_listsnaps() {
    let mut h = H::new();
    let mut ws = OSDOp::new(op::WRITESAME).with_indata(&b"ab"[..]);
    // writesame: offset, length, data_length
    let mut a = [0u8; 28];
    a[0..8].copy_from_slice(&2u64.to_le_bytes());
    a[8..16].copy_from_slice(&6u64.to_le_bytes());
    a[16..24].copy_from_slice(&2u64.to_le_bytes());
    ws.args = a;
    assert_eq!(h.run("s", vec![ws.clone()]).result, 0);
    assert_eq!(&h.run("s", vec![read(0, 0)]).ops[0].outdata[..], b"\0\0ababab");
    a[8..16].copy_from_slice(&5u64.to_le_bytes());
    ws.args = a;
    assert_eq!(
        h.run("s", vec![ws]).result,
        -22,
        "length not a multiple of the pattern"
    );
    // crc32c per 4-byte chunk with init -1
    let mut ck = OSDOp::new(op::CHECKSUM).with_indata(u32::MAX.to_le_bytes().to_vec());
    let mut a = [0u8; 28];
    a[8..16].copy_from_slice(&8u64.to_le_bytes());
    a[16..20].copy_from_slice(&4u32.to_le_bytes());
    a[20] = 2;
    ck.args = a;
    let r = h.run("s", vec![ck]);
    assert_eq!(r.result, 0);
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    assert_eq!(d.u32().unwrap(), 2);
    assert_eq!(d.u32().unwrap(), ceph_crc::ceph_crc32c(u32::MAX, b"\0\0ab"));
    assert_eq!(d.u32().unwrap(), ceph_crc::ceph_crc32c(u32::MAX, b"abab"));
    // list-snaps of a head-only object: one clone entry for the head with its size
    let mut m = h.msg("s", "", vec![OSDOp::new(op::LIST_SNAPS)]);
    m.snapid = SnapId::SNAPDIR;
    let r = h.send(m);
    assert_eq!(r.result, 0);
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    let (n, id, size) = d
        .decode_struct("obj_list_snap_response_t", 2, |_, d| {
            let n = d.u32()?;
            let (id, size) = d.decode_struct("clone_info", 1, |_, d| {
                let id = d.u64()?;
                let _: Vec<u64> = d.decode()?;
                let _: Vec<(u64, u64)> = d.decode()?;
                Ok((id, d.u64()?))
            })?;
            Ok((n, id, size))
        })
        .unwrap();
    assert_eq!((n, id, size), (1, u64::MAX - 1, 8));
}

#[test]
fn hostile_extents_do_not_panic() {
    let mut h = H::new();
    h.run("e", vec![write(0, b"abc")]);
    for code in [
        op::READ,
        op::SPARSE_READ,
        op::CMPEXT,
        op::ZERO,
        op::TRUNCATE,
        op::CHECKSUM,
        op::WRITESAME,
    ] {
        for (off, len) in [
            (u64::MAX, u64::MAX),
            (u64::MAX - 1, 2),
            (1, u64::MAX),
            (0, u64::MAX),
        ] {
            let mut o = OSDOp::new(code).with_indata(&b"abcd"[..]);
            o.set_extent(Extent {
                offset: off,
                length: len,
                truncate_size: u64::MAX,
                truncate_seq: 7,
            });
            let r = h.run("e", vec![o]);
            assert!(r.result <= 1, "{} {off} {len}: {}", op::name(code), r.result);
        }
    }
    let mut w = OSDOp::new(op::WRITE).with_indata(&b"abcd"[..]);
    w.set_extent(Extent {
        offset: u64::MAX - 1,
        length: 4,
        truncate_size: 0,
        truncate_seq: 0,
    });
    assert_eq!(h.run("e", vec![w]).result, -27);
}

mod random {
    use super::*;
    use proptest::prelude::*;

    fn arb_op() -> impl Strategy<Value = OSDOp> {
        prop_oneof![
            // (no empty writes: one past the end extends the object but, as in Ceph, keeps the old data digest,
            // so a later full read fails its digest check)
            (0u64..9000, proptest::collection::vec(any::<u8>(), 1..300)).prop_map(|(o, d)| write(o, &d)),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(|d| writefull(&d)),
            proptest::collection::vec(any::<u8>(), 1..50).prop_map(|d| OSDOp::new(op::APPEND)
                .with_extent(0, d.len() as u64)
                .with_indata(d)),
            (0u64..9000).prop_map(|s| OSDOp::new(op::TRUNCATE).with_extent(s, 0)),
            (0u64..9000, 0u64..9000).prop_map(|(o, l)| OSDOp::new(op::ZERO).with_extent(o, l)),
            Just(OSDOp::new(op::DELETE)),
            Just(OSDOp::new(op::CREATE)),
            Just(OSDOp::new(op::STAT)),
            (0u64..9000, 0u64..500).prop_map(|(o, l)| read(o, l)),
            Just(xattr_op(op::SETXATTR, "k", b"v")),
            Just(omap_set(&[("a", "1")])),
            Just(OSDOp::new(op::OMAPCLEAR)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        /// Any op sequence leaves the PG's counters equal to what is stored, and never panics.
        #[test]
        fn stats_follow_the_objects(seq in proptest::collection::vec((0usize..4, proptest::collection::vec(arb_op(), 1..4)), 1..16)) {
            let mut h = H::new();
            // what each object should hold: None = absent
            let mut model: BTreeMap<usize, Option<Vec<u8>>> = BTreeMap::new();
            for (obj, ops) in seq {
                let name = format!("r{obj}");
                let r = h.run(&name, ops.clone());
                if r.result < 0 {
                    continue;
                }
                let mut cur = model.get(&obj).cloned().flatten();
                for o in &ops {
                    let x = o.extent();
                    match o.op {
                        op::WRITE => {
                            let d = cur.get_or_insert_with(Vec::new);
                            let end = (x.offset + x.length) as usize;
                            if d.len() < end {
                                d.resize(end, 0);
                            }
                            d[x.offset as usize..end].copy_from_slice(&o.indata);
                        }
                        op::WRITEFULL => cur = Some(o.indata.to_vec()),
                        op::APPEND => cur.get_or_insert_with(Vec::new).extend_from_slice(&o.indata),
                        op::TRUNCATE => {
                            if let Some(d) = cur.as_mut() {
                                d.resize(x.offset as usize, 0);
                            }
                        }
                        op::ZERO => {
                            if let Some(d) = cur.as_mut() {
                                let (s0, e0) = (x.offset as usize, (x.offset + x.length) as usize);
                                if x.length > 0 && s0 < d.len() {
                                    if e0 >= d.len() {
                                        d.truncate(s0);
                                    } else {
                                        d[s0..e0].fill(0);
                                    }
                                }
                            }
                        }
                        op::DELETE => cur = None,
                        op::CREATE | op::OMAPSETVALS | op::SETXATTR => {
                            cur.get_or_insert_with(Vec::new);
                        }
                        _ => {}
                    }
                }
                model.insert(obj, cur);
            }
            h.drain();
            for (obj, want) in &model {
                let r = h.run(&format!("r{obj}"), vec![read(0, 0)]);
                match want {
                    None => prop_assert_eq!(r.result, ENOENT),
                    Some(d) => {
                        prop_assert_eq!(r.result, 0);
                        prop_assert_eq!(&r.ops[0].outdata[..], &d[..]);
                    }
                }
            }
            h.drain();
            let (objs, _) = h.pg.list_objects(&mut h.store, &HObject::default(), 100).unwrap();
            let mut bytes = 0;
            for o in &objs {
                let r = h.run(std::str::from_utf8(o.oid.as_bytes()).unwrap(), vec![OSDOp::new(op::STAT)]);
                prop_assert_eq!(r.result, 0);
                bytes += u64::decode_all(r.ops[0].outdata.slice(..8)).unwrap();
                let data = h.run(std::str::from_utf8(o.oid.as_bytes()).unwrap(), vec![read(0, 0)]);
                prop_assert_eq!(data.ops[0].outdata.len() as u64, u64::decode_all(r.ops[0].outdata.slice(..8)).unwrap());
            }
            prop_assert_eq!(h.pg.stats().num_objects, objs.len() as u64);
            prop_assert_eq!(h.pg.stats().num_bytes, bytes);
        }
    }
}

#[test]
fn cls_lock_expiry_renewal_and_ephemeral() {
    let mut h = H::new();
    let ten = Utime::new(10, 0);
    let m = h.msg(
        "x",
        "",
        vec![call("lock", "lock", lock_op_for("L", 1, "c", "", 0, ten))],
    );
    assert_eq!(h.send_as(m, 1, 1).result, 0);
    // renewing needs MAY_RENEW; MUST_RENEW on a lock not held is ENOENT; both flags together EINVAL
    let m = h.msg(
        "x",
        "",
        vec![call("lock", "lock", lock_op_for("L", 1, "c", "", 1, ten))],
    );
    assert_eq!(h.send_as(m, 1, 1).result, 0);
    let m = h.msg(
        "x",
        "",
        vec![call("lock", "lock", lock_op_for("L", 1, "other", "", 2, ten))],
    );
    assert_eq!(h.send_as(m, 1, 1).result, ENOENT);
    let m = h.msg(
        "x",
        "",
        vec![call("lock", "lock", lock_op_for("L", 1, "c", "", 3, ten))],
    );
    assert_eq!(h.send_as(m, 1, 1).result, -22);
    // another client waits until the lock expires
    let m = h.msg("x", "", vec![call("lock", "lock", lock_op("L", 1, "d", "", 0))]);
    assert_eq!(h.send_as(m, 2, 2).result, -16);
    h.now = Utime::new(h.now.sec + 11, 0);
    let m = h.msg("x", "", vec![call("lock", "lock", lock_op("L", 1, "d", "", 0))]);
    assert_eq!(h.send_as(m, 2, 2).result, 0);
    // an ephemeral exclusive lock creates the object and its unlock removes the object
    let m = h.msg("eph", "", vec![call("lock", "lock", lock_op("E", 3, "c", "", 0))]);
    assert_eq!(h.send_as(m, 1, 1).result, 0);
    assert_eq!(h.run("eph", vec![OSDOp::new(op::STAT)]).result, 0);
    let mut e = Encoder::new(0);
    e.versioned(1, 1, |e| {
        e.string("E");
        e.string("c");
    });
    let m = h.msg("eph", "", vec![call("lock", "unlock", e.into_bytes())]);
    assert_eq!(h.send_as(m, 1, 1).result, 0);
    assert_eq!(h.run("eph", vec![OSDOp::new(op::STAT)]).result, ENOENT);
    // bad input
    assert_eq!(
        h.run("x", vec![call("lock", "lock", Bytes::from_static(b"\x01"))])
            .result,
        -22
    );
}

mod random_meta {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Act {
        SetX(u8, u8),
        RmX(u8),
        SetK(u8, u8),
        RmK(u8),
        Clear,
        Delete,
        Resend,
        Restart,
    }

    fn arb_act() -> impl Strategy<Value = Act> {
        prop_oneof![
            (0u8..3, any::<u8>()).prop_map(|(k, v)| Act::SetX(k, v)),
            (0u8..3).prop_map(Act::RmX),
            (0u8..3, any::<u8>()).prop_map(|(k, v)| Act::SetK(k, v)),
            (0u8..3).prop_map(Act::RmK),
            Just(Act::Clear),
            Just(Act::Delete),
            Just(Act::Resend),
            Just(Act::Restart),
        ]
    }

    fn restart(h: &mut H) {
        h.drain();
        sim::remount(&mut h.store);
        h.pg = sim::loaded_pg(&mut h.store, pool(), PgConfig::default());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
        /// xattrs and omap follow a model through deletes, resends (answered, not re-executed) and restarts.
        #[test]
        fn xattrs_and_omap_follow_the_model(acts in proptest::collection::vec(arb_act(), 1..25)) {
            let mut h = H::new();
            let mut exists = false;
            let mut xs: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            let mut ks: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            let mut last: Option<(MOSDOp, MOSDOpReply)> = None;
            for a in acts {
                let ops = match &a {
                    Act::SetX(k, v) => vec![xattr_op(op::SETXATTR, &format!("x{k}"), &[*v])],
                    Act::RmX(k) => vec![xattr_op(op::RMXATTR, &format!("x{k}"), b"")],
                    Act::SetK(k, v) => vec![omap_set(&[(&format!("k{k}"), &format!("{v}"))])],
                    Act::RmK(k) => {
                        let rm: std::collections::BTreeSet<Bytes> = [Bytes::from(format!("k{k}"))].into();
                        vec![OSDOp::new(op::OMAPRMKEYS).with_indata(enc(&rm))]
                    }
                    Act::Clear => vec![OSDOp::new(op::OMAPCLEAR)],
                    Act::Delete => vec![OSDOp::new(op::DELETE)],
                    Act::Resend => {
                        if let Some((m, r)) = &last {
                            let again = h.send(m.clone());
                            prop_assert_eq!(again.result, r.result);
                            // (a failed or no-op write's resend carries its ERROR entry's version, as Ceph's does)
                            if r.replay_version != Eversion::default() {
                                prop_assert_eq!((again.replay_version, again.user_version), (r.replay_version, r.user_version));
                            }
                        }
                        continue;
                    }
                    Act::Restart => {
                        restart(&mut h);
                        continue;
                    }
                };
                let m = h.msg("m", "", ops);
                let r = h.send(m.clone());
                let want_ok = match &a {
                    Act::SetX(..) | Act::SetK(..) => true,
                    _ => exists,
                };
                prop_assert_eq!(r.result == 0, want_ok, "{:?} -> {}", a, r.result);
                if r.result == 0 {
                    match &a {
                        Act::SetX(k, v) => { exists = true; xs.insert(format!("x{k}"), vec![*v]); }
                        Act::RmX(k) => { xs.remove(&format!("x{k}")); }
                        Act::SetK(k, v) => { exists = true; ks.insert(format!("k{k}"), format!("{v}").into_bytes()); }
                        Act::RmK(k) => { ks.remove(&format!("k{k}")); }
                        Act::Clear => ks.clear(),
                        Act::Delete => { exists = false; xs.clear(); ks.clear(); }
                        _ => {}
                    }
                }
                last = Some((m, r));
                // check the object against the model
                let r = h.run("m", vec![OSDOp::new(op::GETXATTRS), omap_get_vals("", 100, "")]);
                if !exists {
                    prop_assert_eq!(r.result, ENOENT);
                    continue;
                }
                prop_assert_eq!(r.result, 0);
                let got: BTreeMap<Bytes, Bytes> = BTreeMap::decode_all(r.ops[0].outdata.clone()).unwrap();
                let got: BTreeMap<String, Vec<u8>> = got.into_iter().map(|(k, v)| (String::from_utf8(k.to_vec()).unwrap(), v.to_vec())).collect();
                prop_assert_eq!(&got, &xs);
                let (vals, more) = decode_vals(&r.ops[1].outdata);
                prop_assert!(!more);
                let vals: BTreeMap<String, Vec<u8>> = vals.into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
                prop_assert_eq!(&vals, &ks);
            }
        }
    }
}

/// (clone id, snaps, overlap, size)
type CloneInfo = (u64, Vec<u64>, Vec<(u64, u64)>, u64);

fn list_snaps(h: &mut H, oid: &str) -> (i32, Vec<CloneInfo>, u64) {
    let mut m = h.msg(oid, "", vec![OSDOp::new(op::LIST_SNAPS)]);
    m.snapid = SnapId::SNAPDIR;
    let r = h.send(m);
    if r.result < 0 {
        return (r.result, vec![], 0);
    }
    let mut d = Decoder::new(r.ops[0].outdata.clone());
    let (clones, seq) = d
        .decode_struct("obj_list_snap_response_t", 2, |_, d| {
            let n = d.u32()?;
            let mut v = Vec::new();
            for _ in 0..n {
                v.push(d.decode_struct("clone_info", 1, |_, d| {
                    Ok((
                        d.u64()?,
                        d.decode::<Vec<u64>>()?,
                        d.decode::<Vec<(u64, u64)>>()?,
                        d.u64()?,
                    ))
                })?);
            }
            Ok((v, d.u64()?))
        })
        .unwrap();
    (r.result, clones, seq)
}

fn read_at(h: &mut H, oid: &str, snap: u64) -> (i32, Bytes) {
    let mut m = h.msg(oid, "", vec![read(0, 0)]);
    m.snapid = SnapId(snap);
    let r = h.send(m);
    (r.result, r.ops[0].outdata.clone())
}

#[test]
fn snapshots_clone_on_write() {
    let mut h = H::new();
    h.run("s", vec![write(0, b"v1v1")]);
    // a read at a snap newer than the object's last write sees the head
    assert_eq!(read_at(&mut h, "s", 5), (0, Bytes::from_static(b"v1v1")));
    // the first write under snap context {seq 5, [5]} preserves the head as clone 5 (and takes two versions)
    let before = h.pg.stats();
    let mut m = h.msg("s", "", vec![write(0, b"v2")]);
    m.snap_seq = SnapId(5);
    m.snaps = vec![SnapId(5)];
    let r = h.send(m);
    assert_eq!(r.result, 0);
    assert_eq!(r.replay_version.version, before.last_update.version + 2);
    assert_eq!(h.pg.stats().num_objects, before.num_objects + 1);
    assert_eq!(&h.run("s", vec![read(0, 0)]).ops[0].outdata[..], b"v2v1");
    assert_eq!(read_at(&mut h, "s", 5), (0, Bytes::from_static(b"v1v1")));
    // snap 3 is not one of clone 5's snaps: nothing, as Ceph answers
    assert_eq!(read_at(&mut h, "s", 3).0, ENOENT);
    // list-snaps: clone 5 (snaps [5], overlap now [2, 4)) and the head; the snapset's seq is 5
    let (r, clones, seq) = list_snaps(&mut h, "s");
    assert_eq!((r, seq), (0, 5));
    assert_eq!(
        clones,
        vec![(5, vec![5], vec![(2, 2)], 4), (u64::MAX - 1, vec![], vec![], 4)]
    );
    // pool snapshots: the pool's context replaces the client's
    h.pg.set_pool_snap_context(8, vec![8, 5]);
    assert_eq!(h.run("s", vec![write(0, b"v3")]).result, 0);
    assert_eq!(read_at(&mut h, "s", 8), (0, Bytes::from_static(b"v2v1")));
    assert_eq!(read_at(&mut h, "s", 5), (0, Bytes::from_static(b"v1v1")));
    // deleting the head leaves a whiteout: the head is gone for readers, the snaps stay readable
    assert_eq!(h.run("s", vec![OSDOp::new(op::DELETE)]).result, 0);
    assert_eq!(h.run("s", vec![OSDOp::new(op::STAT)]).result, ENOENT);
    assert_eq!(h.run("s", vec![OSDOp::new(op::DELETE)]).result, ENOENT);
    assert_eq!(read_at(&mut h, "s", 8), (0, Bytes::from_static(b"v2v1")));
    let (_, clones, _) = list_snaps(&mut h, "s");
    assert_eq!(clones.iter().map(|c| c.0).collect::<Vec<_>>(), vec![5, 8]);
    // writing again brings the head back
    assert_eq!(h.run("s", vec![writefull(b"new")]).result, 0);
    assert_eq!(&h.run("s", vec![read(0, 0)]).ops[0].outdata[..], b"new");
    h.pg.set_pool_snap_context(0, vec![]);
    // a new object needs no clone; a read at a snap older than its first write finds nothing
    let mut m = h.msg("n", "", vec![write(0, b"x")]);
    m.snap_seq = SnapId(9);
    m.snaps = vec![SnapId(9)];
    assert_eq!(h.send(m).result, 0);
    assert_eq!(read_at(&mut h, "n", 9).0, ENOENT);
}

#[test]
fn rollback_to_a_snapshot() {
    let mut h = H::new();
    h.run("r", vec![write(0, b"old!"), xattr_op(op::SETXATTR, "a", b"1")]);
    h.pg.set_pool_snap_context(5, vec![5]);
    // the write clones the head (clone 5 = "old!" with a=1), then changes data and the xattr
    h.run("r", vec![writefull(b"new"), xattr_op(op::SETXATTR, "a", b"2")]);
    assert_eq!(&h.run("r", vec![read(0, 0)]).ops[0].outdata[..], b"new");
    let mut rb = OSDOp::new(op::ROLLBACK);
    rb.args[0..8].copy_from_slice(&5u64.to_le_bytes());
    assert_eq!(h.run("r", vec![rb.clone()]).result, 0);
    assert_eq!(&h.run("r", vec![read(0, 0)]).ops[0].outdata[..], b"old!");
    assert_eq!(
        &h.run("r", vec![xattr_op(op::GETXATTR, "a", b"")]).ops[0].outdata[..],
        b"1"
    );
    // a snap at which the object did not exist: the head goes (a whiteout, since clones remain)
    let mut rb3 = OSDOp::new(op::ROLLBACK);
    rb3.args[0..8].copy_from_slice(&3u64.to_le_bytes());
    assert_eq!(h.run("r", vec![rb3]).result, 0);
    assert_eq!(h.run("r", vec![OSDOp::new(op::STAT)]).result, ENOENT);
    assert_eq!(read_at(&mut h, "r", 5), (0, Bytes::from_static(b"old!")));
    // and back again
    assert_eq!(h.run("r", vec![rb]).result, 0);
    assert_eq!(&h.run("r", vec![read(0, 0)]).ops[0].outdata[..], b"old!");
    h.pg.set_pool_snap_context(0, vec![]);
}

/// The object data digest of a full-object write and of an append, computed from the page crcs msgr2 attached to
/// the received data (no second pass over it), equals Ceph's crc of the bytes; a full read checks it.
#[test]
fn data_digest_from_attached_page_crcs() {
    let mut h = H::new();
    let page_aligned = |len: usize, seed: u8| {
        let mut v = vec![0u8; len + 4096];
        let pad = v.as_ptr().align_offset(4096);
        for (i, b) in v.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(13).wrapping_add(seed);
        }
        Bytes::from(v).slice(pad..pad + len)
    };
    let digest = |h: &mut H| {
        let key = pg::keys::object_key(
            &HObject::new("d", "", SnapId::NOSNAP, name_hash("d"), 3, ""),
            &spgid(),
        );
        let oi = h.store.getattr(h.pg.collection(), &key, b"_").unwrap();
        osd_types::ObjectInfo::decode_all(oi).unwrap().data_digest
    };
    let (_, first) = ceph_crc::blocks::attach(page_aligned(64 * 1024, 1));
    assert!(ceph_crc::blocks::page_crcs(&first).is_some());
    let wf = OSDOp::new(op::WRITEFULL)
        .with_extent(0, first.len() as u64)
        .with_indata(first.clone());
    assert_eq!(h.run("d", vec![wf]).result, 0);
    assert_eq!(digest(&mut h), ceph_crc::ceph_crc32c(u32::MAX, &first));
    // An append continues the digest from the old one (seeded crc).
    let (_, second) = ceph_crc::blocks::attach(page_aligned(32 * 1024, 2));
    let ap = OSDOp::new(op::APPEND)
        .with_extent(0, second.len() as u64)
        .with_indata(second.clone());
    assert_eq!(h.run("d", vec![ap]).result, 0);
    let whole: Vec<u8> = first.iter().chain(second.iter()).copied().collect();
    assert_eq!(digest(&mut h), ceph_crc::ceph_crc32c(u32::MAX, &whole));
    let r = h.run("d", vec![read(0, 0)]);
    assert_eq!((r.result, &r.ops[0].outdata[..]), (0, &whole[..]));
}
