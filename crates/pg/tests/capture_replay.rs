// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! Differential test against a real BlueStore OSD: every client op of the replicated pool in the crc capture
//! (rados put/get/stat/xattrs/omap/append/truncate/ls/rm, watch/notify, cls lock, rados bench) is replayed, in
//! the order the OSDs received them, into our PGs; each of our replies must equal the real one: result,
//! per-op return values, output data and the reply versions (user_version, replay_version).
//!
//! Ops before the moment an OSD was killed are compared (after it, resends and peering make the real order
//! unknowable from the capture). Skips when the capture is absent.

mod common;

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use ceph_msgs::CephMessage;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify, flag, op, osd_msg_type};
use common::sim;
use common::{MESSAGE_TAG, frames, read_capture, to_message};
use denc::{EntityAddr, EntityNameT, ShardId, SpgId, Utime};
use ferrostore::{Event, SimDevice, Store};
use msgr2::control::Control;
use msgr2::frame::Tag;
use pg::{ConnId, OpContext, OsdCap, Pg, PgConfig, PoolInfo};

struct Req {
    ts: u64,
    conn: usize,
    client: EntityNameT,
    addr: EntityAddr,
    msg: MOSDOp,
    reply: Option<MOSDOpReply>,
}

fn store() -> Store<SimDevice> {
    sim::sim_store(96 << 20, 4 << 20, 1, sim::sim(1, false, 64, true))
}

#[test]
fn replies_equal_a_real_osds() {
    let Some(cap) = read_capture() else { return };
    let mut reqs: Vec<Req> = Vec::new();
    let mut real_notifies: Vec<MWatchNotify> = Vec::new();
    let mut our_notifies: Vec<MWatchNotify> = Vec::new();
    for (ci, c) in cap.connections().iter().enumerate() {
        let s = &c.to_server;
        let mut entity_type = 0u8;
        let mut gid = 0i64;
        let mut addr = EntityAddr::default();
        let mut mine = Vec::new();
        for (t, f) in frames(s) {
            match Tag::from_u8(f.tag) {
                Some(Tag::Hello) | Some(Tag::ClientIdent) => {
                    let tag = Tag::from_u8(f.tag).unwrap();
                    match Control::decode(tag, f.segments[0].clone()) {
                        Ok(Control::Hello { entity_type: et, .. }) => entity_type = et,
                        Ok(Control::ClientIdent(ci)) => {
                            gid = ci.gid;
                            // the address the client announced (its IP learned from HELLO, port 0 for a client
                            // that does not listen): what the OSD reports for it (lock owners, watchers)
                            if let Some(a) = ci.addrs.0.first() {
                                let sock = a
                                    .addr
                                    .unwrap_or_else(|| std::net::SocketAddr::new(c.client.ip(), 0));
                                addr = EntityAddr::new(a.ty, sock, a.nonce);
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
            if f.tag == MESSAGE_TAG {
                let m = to_message(&f);
                if m.msg_type == osd_msg_type::OSD_OP {
                    mine.push((t, MOSDOp::decode_message(&m).unwrap()));
                }
            }
        }
        if mine.is_empty() {
            continue;
        }
        let mut replies: HashMap<u64, MOSDOpReply> = HashMap::new();
        for (_, f) in frames(&c.to_client) {
            if f.tag == MESSAGE_TAG {
                let m = to_message(&f);
                if m.msg_type == osd_msg_type::WATCH_NOTIFY {
                    real_notifies.push(MWatchNotify::from_message(&m).unwrap());
                }
                if m.msg_type == osd_msg_type::OSD_OPREPLY {
                    let r = MOSDOpReply::decode_message(&m).unwrap();
                    replies.entry(r.tid).or_insert(r);
                }
            }
        }
        for (t, msg) in mine {
            let reply = replies.remove(&msg.tid);
            reqs.push(Req {
                ts: t,
                conn: ci,
                client: EntityNameT::new(entity_type, gid),
                addr,
                msg,
                reply,
            });
        }
    }
    reqs.sort_by_key(|r| r.ts);
    let Some(first) = reqs.iter().find(|r| r.msg.oid.as_bytes() == b"obj1") else {
        panic!("no op on obj1 in the capture");
    };
    let pool_id = first.msg.pgid.pgid.pool;
    // compare up to the first resend (the OSD kill)
    let cutoff = reqs
        .iter()
        .find(|r| r.msg.flags & flag::RETRY != 0)
        .map_or(u64::MAX, |r| r.ts);

    let mut store = store();
    let mut pgs: BTreeMap<u32, Pg> = BTreeMap::new();
    let caps = OsdCap::allow_all();
    let mut compared = 0usize;
    let mut mismatches = Vec::new();
    let mut op_names: BTreeMap<&'static str, usize> = BTreeMap::new();
    for r in reqs
        .iter()
        .filter(|r| r.msg.pgid.pgid.pool == pool_id && r.ts < cutoff)
    {
        assert_eq!(r.msg.pgid.shard, ShardId::NO_SHARD);
        let Some(real) = &r.reply else { continue };
        let seed = r.msg.pgid.pgid.seed;
        let pg = pgs.entry(seed).or_insert_with(|| {
            let mut pg = Pg::new(
                SpgId::new(r.msg.pgid.pgid, ShardId::NO_SHARD),
                PoolInfo {
                    id: pool_id as i64,
                    name: "rep3".into(),
                    pg_num: 8,
                    erasure: false,
                    applications: vec![],
                },
                PgConfig::default(),
            );
            let seq = pg.create(&mut store, real.osdmap_epoch).unwrap();
            store.wait_durable(seq).unwrap();
            pg.on_commit(seq);
            pg
        });
        let ctx = OpContext {
            msg: r.msg.clone(),
            conn: ConnId(r.conn as u64),
            client: r.client,
            client_addr: r.addr,
            caps: &caps,
            conn_features: u64::MAX,
            epoch: real.osdmap_epoch,
            now: Utime::new((r.ts / 1_000_000) as u32, ((r.ts % 1_000_000) * 1000) as u32),
        };
        let out = pg.handle_op(&mut store, ctx);
        our_notifies.extend(out.notifies.into_iter().map(|(_, n)| n));
        let mut got: Vec<MOSDOpReply> = out.replies.into_iter().map(|(_, x)| x).collect();
        let mut rounds = 0;
        while !got.iter().any(|x| x.tid == r.msg.tid) {
            rounds += 1;
            assert!(rounds < 1000, "no reply to {:?}", r.msg);
            let mut ev = Vec::new();
            store.wait(&mut ev).unwrap();
            for e in ev {
                if let Event::Durable(s) = e {
                    for p in pgs.values_mut() {
                        let o = p.on_commit(s);
                        our_notifies.extend(o.notifies.into_iter().map(|(_, n)| n));
                        got.extend(o.replies.into_iter().map(|(_, x)| x));
                    }
                }
            }
        }
        let mine = got.into_iter().find(|x| x.tid == r.msg.tid).unwrap();
        let mine = MOSDOpReply::decode_message(&mine.encode_message(u64::MAX)).unwrap();
        compared += 1;
        for o in &r.msg.ops {
            *op_names.entry(op::name(o.op)).or_default() += 1;
        }
        let mut diffs = Vec::new();
        if mine.result != real.result {
            diffs.push(format!("result {} vs {}", mine.result, real.result));
        }
        if (mine.user_version, mine.replay_version, mine.bad_replay_version)
            != (real.user_version, real.replay_version, real.bad_replay_version)
        {
            diffs.push(format!(
                "versions uv {} v {} bad {} vs uv {} v {} bad {}",
                mine.user_version,
                mine.replay_version,
                mine.bad_replay_version,
                real.user_version,
                real.replay_version,
                real.bad_replay_version
            ));
        }
        if mine.flags != real.flags {
            diffs.push(format!("flags {:#x} vs {:#x}", mine.flags, real.flags));
        }
        for (i, (a, b)) in mine.ops.iter().zip(&real.ops).enumerate() {
            if a.rval != b.rval {
                diffs.push(format!("op {i} rval {} vs {}", a.rval, b.rval));
            }
            if a.outdata != b.outdata {
                diffs.push(format!(
                    "op {i} ({}) outdata {:?} vs {:?}",
                    op::name(a.op),
                    short(&a.outdata),
                    short(&b.outdata)
                ));
            }
            if a.args != b.args && a.op != op::CALL {
                diffs.push(format!("op {i} ({}) args differ", op::name(a.op)));
            }
        }
        if !diffs.is_empty() {
            mismatches.push(format!(
                "{} {} {:?}: {}",
                r.msg.oid,
                r.msg.tid,
                r.msg.ops.iter().map(|o| op::name(o.op)).collect::<Vec<_>>(),
                diffs.join("; ")
            ));
        }
    }
    eprintln!("compared {compared} replies; ops: {op_names:?}");
    for m in mismatches.iter().take(30) {
        eprintln!("MISMATCH {m}");
    }
    // the watch-notify messages the real OSD sent (notify to the watcher / completion) are the ones we send
    eprintln!(
        "watch-notify: {} real, {} ours",
        real_notifies.len(),
        our_notifies.len()
    );
    for n in &real_notifies {
        assert!(
            our_notifies.contains(n),
            "we did not send {n:?}; ours: {our_notifies:?}"
        );
    }
    assert!(!real_notifies.is_empty());
    assert!(compared > 1000, "too few ops compared: {compared}");
    assert!(
        mismatches.is_empty(),
        "{} of {compared} replies differ",
        mismatches.len()
    );
}

fn short(b: &Bytes) -> String {
    if b.len() <= 100 {
        format!("{:02x?}", &b[..])
    } else {
        format!("{} bytes {:02x?}..", b.len(), &b[..24])
    }
}
