// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! The replica path against real Ceph 16.2.15 traffic (../shared/captures/crc): every MOSDRepOp of the capture
//! is applied, in capture order, to a ferrostore of the OSD that received it (and once to its sender's, whose
//! primary applied the same transaction), with its log entries; pushes (log-based recovery after osd.2's
//! restart, backfill after osd.1's out/in), recovery deletes and backfill removes are applied as well. Every
//! transaction must apply without error, and wherever two OSDs hold an object at the same version, their copies
//! must be byte-identical (data, xattrs, omap).

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use ceph_msgs::CephMessage;
use ceph_msgs::osd_rep::{
    MOSDPGBackfillRemove, MOSDPGPull, MOSDPGPush, MOSDPGPushReply, MOSDPGRecoveryDelete, MOSDRepOp,
    MOSDRepOpReply, rep_msg,
};
use common::sim;
use denc::{Decode, SpgId};
use ferrostore::{SimDevice, Store};
use pg::{Pg, PgConfig, PoolInfo};

fn new_store(seed: u64) -> Store<SimDevice> {
    sim::sim_store(96 << 20, 4 << 20, seed, sim::sim(seed, false, 64, false))
}

fn sender(m: &ceph_msgs::Message) -> Option<i32> {
    Some(match m.msg_type {
        rep_msg::REPOPREPLY => MOSDRepOpReply::from_message(m).ok()?.from.osd,
        rep_msg::PG_PUSH_REPLY => MOSDPGPushReply::from_message(m).ok()?.from.osd,
        rep_msg::PG_PUSH => MOSDPGPush::from_message(m).ok()?.from.osd,
        rep_msg::PG_PULL => MOSDPGPull::from_message(m).ok()?.from.osd,
        rep_msg::REPOP => MOSDRepOp::from_message(m).ok()?.from.osd,
        _ => return None,
    })
}

struct Osd {
    store: Store<SimDevice>,
    pgs: BTreeMap<SpgId, Pg>,
}

/// The PG on an OSD, created (empty, as a replica) the first time it is named.
fn pg_of<'a>(store: &mut Store<SimDevice>, pgs: &'a mut BTreeMap<SpgId, Pg>, spgid: SpgId) -> &'a mut Pg {
    pgs.entry(spgid).or_insert_with(|| {
        let mut p = Pg::new(
            spgid,
            PoolInfo {
                id: spgid.pgid.pool as i64,
                name: "rep3".into(),
                pg_num: 8,
                erasure: false,
                applications: vec![],
            },
            PgConfig::default(),
        );
        p.set_primary(false);
        let seq = p.create(store, 1).unwrap();
        store.wait_durable(seq).unwrap();
        p
    })
}

fn osd(osds: &mut BTreeMap<i32, Osd>, id: i32) -> &mut Osd {
    osds.entry(id).or_insert_with(|| Osd {
        store: new_store(id as u64 + 1),
        pgs: BTreeMap::new(),
    })
}

/// One OSD's copy of an object: (osd, its version as text, data + xattrs + omap concatenated).
type Copy = (i32, Bytes, Vec<u8>);

#[test]
fn every_captured_rep_op_applies_and_replicas_agree() {
    let Some(cap) = common::read_capture() else {
        eprintln!("skipping: ../shared/captures/crc not found");
        return;
    };
    // (time, receiver, message) for every message a replica-side store applies
    let mut events: Vec<(u64, i32, ceph_msgs::Message)> = Vec::new();
    let mut unknown_receiver = 0;
    for c in cap.connections() {
        for (s, opp) in [(&c.to_server, &c.to_client), (&c.to_client, &c.to_server)] {
            let wanted = |t: u16| {
                matches!(
                    t,
                    rep_msg::REPOP
                        | rep_msg::PG_PUSH
                        | rep_msg::PG_BACKFILL_REMOVE
                        | rep_msg::PG_RECOVERY_DELETE
                )
            };
            let msgs: Vec<(u64, ceph_msgs::Message)> = common::frames(s)
                .into_iter()
                .filter(|(_, f)| f.tag == common::MESSAGE_TAG)
                .map(|(t, f)| (t, common::to_message(&f)))
                .filter(|(_, m)| wanted(m.msg_type))
                .collect();
            if msgs.is_empty() {
                continue;
            }
            let receiver = common::messages(opp).iter().find_map(sender);
            let Some(r) = receiver else {
                unknown_receiver += msgs.len();
                continue;
            };
            events.extend(msgs.into_iter().map(|(t, m)| (t, r, m)));
        }
    }
    events.sort_by_key(|(t, _, _)| *t);
    let mut osds: BTreeMap<i32, Osd> = BTreeMap::new();
    let (mut repops, mut applied, mut pushes, mut removes, mut skipped) = (0, 0, 0, 0, 0);
    let mut errors = Vec::new();
    for (_, recv, m) in &events {
        match m.msg_type {
            rep_msg::REPOP => {
                let r = MOSDRepOp::from_message(m).unwrap();
                repops += 1;
                // the primary applied the same transaction; then the replica that received it
                for id in [r.from.osd, *recv] {
                    let Osd { store, pgs } = osd(&mut osds, id);
                    let p = pg_of(store, pgs, r.pgid);
                    if r.version <= p.info().last_update {
                        skipped += 1;
                        continue;
                    }
                    match p.apply_rep_op_msg(store, &r) {
                        Ok(seq) => {
                            store.wait_durable(seq).unwrap();
                            applied += 1;
                        }
                        Err(e) => errors.push(format!("osd.{id} {} {}: {e}", r.pgid, r.version)),
                    }
                }
            }
            rep_msg::PG_PUSH => {
                let push = MOSDPGPush::from_message(m).unwrap();
                let Osd { store, pgs } = osd(&mut osds, *recv);
                let p = pg_of(store, pgs, push.pgid);
                for op in &push.pushes {
                    pushes += 1;
                    match p.apply_push(store, op) {
                        Ok(a) => store.wait_durable(a.seq).unwrap(),
                        Err(e) => errors.push(format!("push to osd.{recv} {}: {e}", op.soid)),
                    }
                }
            }
            rep_msg::PG_BACKFILL_REMOVE | rep_msg::PG_RECOVERY_DELETE => {
                let (pgid, objs) = if m.msg_type == rep_msg::PG_BACKFILL_REMOVE {
                    let b = MOSDPGBackfillRemove::from_message(m).unwrap();
                    (b.pgid, b.ls)
                } else {
                    let d = MOSDPGRecoveryDelete::from_message(m).unwrap();
                    (d.pgid, d.objects)
                };
                let Osd { store, pgs } = osd(&mut osds, *recv);
                let p = pg_of(store, pgs, pgid);
                for (oid, _) in objs {
                    removes += 1;
                    if let Err(e) = p.remove_object(store, &oid) {
                        errors.push(format!("remove on osd.{recv} {oid}: {e}"));
                    }
                }
            }
            _ => {}
        }
    }
    eprintln!(
        "capture: {repops} MOSDRepOps ({applied} applied on sender and receiver stores, {skipped} already \
         applied), {pushes} PushOps, {removes} removes, {unknown_receiver} with no known receiver, {} OSDs",
        osds.len()
    );
    assert!(
        errors.is_empty(),
        "{} failures: {:#?}",
        errors.len(),
        &errors[..errors.len().min(20)]
    );
    assert!(repops > 100 && pushes > 0, "{repops} rep ops, {pushes} pushes");
    assert_eq!(unknown_receiver, 0);

    // the log entries two OSDs both hold are identical
    let mut entries: BTreeMap<(SpgId, denc::Eversion), (i32, osd_types::PgLogEntry)> = BTreeMap::new();
    let mut same_entries = 0;
    for (osd, o) in &osds {
        for (spgid, p) in &o.pgs {
            for e in p.meta().log.log {
                match entries.get(&(*spgid, e.version)) {
                    Some((other, x)) => {
                        assert_eq!(x, &e, "{spgid} {}: osd.{other} and osd.{osd}", e.version);
                        same_entries += 1;
                    }
                    None => {
                        entries.insert((*spgid, e.version), (*osd, e));
                    }
                }
            }
        }
    }
    eprintln!("{same_entries} log entries held by two OSDs agree");
    assert!(same_entries > 100);
    // every object two OSDs hold at the same version is identical
    let mut copies: BTreeMap<(SpgId, Bytes), Vec<Copy>> = BTreeMap::new();
    for (osd, o) in osds.iter_mut() {
        for (spgid, p) in &o.pgs {
            let cid = p.collection().clone();
            for k in o.store.list_objects(&cid, &[], None, 1_000_000).unwrap() {
                let g = denc::GHObject::from_sort_key(&k.name).unwrap();
                if g.is_pgmeta() || g.hobj.is_temp() {
                    continue;
                }
                let Ok(oi) = o.store.getattr(&cid, &k, b"_") else {
                    continue;
                };
                let v = osd_types::ObjectInfo::decode_all(oi).unwrap().version;
                let size = o.store.stat(&cid, &k).unwrap().size;
                let mut all = o.store.read(&cid, &k, 0, size).unwrap().to_vec();
                for (a, b) in o.store.getattrs(&cid, &k).unwrap() {
                    all.extend_from_slice(&a);
                    all.extend_from_slice(&b);
                }
                all.extend_from_slice(&o.store.omap_get_header(&cid, &k).unwrap());
                for (a, b) in o.store.omap_iterate(&cid, &k, &[], 1_000_000).unwrap() {
                    all.extend_from_slice(&a);
                    all.extend_from_slice(&b);
                }
                copies.entry((*spgid, k.name.clone())).or_default().push((
                    *osd,
                    Bytes::from(v.to_string()),
                    all,
                ));
            }
        }
    }
    let (mut compared, mut objects) = (0, 0);
    for ((spgid, name), cs) in &copies {
        objects += 1;
        for (i, a) in cs.iter().enumerate() {
            for b in &cs[i + 1..] {
                if a.1 == b.1 {
                    compared += 1;
                    assert!(
                        a.2 == b.2,
                        "{spgid} {:?}: osd.{} and osd.{} differ at version {:?}",
                        denc::GHObject::from_sort_key(name).map(|g| g.to_string()),
                        a.0,
                        b.0,
                        a.1
                    );
                }
            }
        }
    }
    eprintln!("{objects} objects, {compared} same-version pairs identical");
    assert!(compared > 100);
}
