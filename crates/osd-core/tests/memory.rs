// SPDX-License-Identifier: LGPL-3.0-or-later
//! What an OSD keeps after a replicated write must not keep the write's messages alive. Decoding is zero-copy:
//! an object name in a client op, and every byte of a rep op's log entries, is a slice of a (64 KiB or larger)
//! receive buffer. The PG log (pg's and peering's copy), dups, the missing set and the object context cache
//! live for hundreds of writes, so they must hold copies; otherwise the OSD's memory grows with every write
//! until the logs are trimmed (pool size 3 in `cargo xtask bench compare`: 263 → 869 MiB over three OSDs).
//! Each test sends client ops and delivers rep ops in buffers that report when they are freed, lets every
//! write complete on every replica, and checks that each buffer is gone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use bytes::Bytes;
use ceph_msgs::osd_op::{MOSDOp, OSDOp, flag, op};
use ceph_msgs::osd_rep::rep_msg;
use common::Cluster;
use denc::{EntityAddr, EntityNameT, ObjectLocator, ObjectName, SnapId, Utime};
use osd_core::{ClientOp, Input};
use pg::{ConnId, OsdCap};
use tracked_bytes::Freed;

/// `content` in a tracked receive buffer, recorded in `flags` as `what`.
fn rx_buffer(content: &[u8], flags: &mut Vec<(String, Freed)>, what: String) -> Bytes {
    let (b, freed) = tracked_bytes::rx_buffer(content);
    flags.push((what, freed));
    b
}

/// A write of `data` to `name`, the name a slice of a tracked receive buffer, handed to the acting primary.
fn send_write(c: &mut Cluster, name: &str, data: &[u8], flags: &mut Vec<(String, Freed)>) -> u64 {
    let (spgid, hash, primary) = c.locate(name);
    c.tid += 1;
    let buf = rx_buffer(name.as_bytes(), flags, format!("client op {name}"));
    let msg = MOSDOp {
        tid: c.tid,
        pgid: spgid,
        hash,
        osdmap_epoch: c.map.epoch,
        flags: flag::ACK | flag::ONDISK | flag::WRITE,
        mtime: Utime::new(1_650_000_000, 5),
        oloc: ObjectLocator {
            pool: 1,
            ..Default::default()
        },
        oid: ObjectName::new(buf),
        ops: vec![
            OSDOp::new(op::WRITE)
                .with_extent(0, data.len() as u64)
                .with_indata(Bytes::copy_from_slice(data)),
        ],
        snapid: SnapId::NOSNAP,
        features: u64::MAX,
        reqid: denc::OsdReqId {
            name: EntityNameT::client(4100),
            tid: c.tid,
            inc: 0,
        },
        ..Default::default()
    };
    let cop = ClientOp {
        conn: ConnId(1),
        msg,
        client: EntityNameT::client(4100),
        client_addr: "v2:10.0.0.9:0/123".parse::<EntityAddr>().unwrap(),
        caps: Arc::new(OsdCap::allow_all()),
        features: u64::MAX,
    };
    let (now, wall) = (c.now, c.wall);
    c.osds
        .get_mut(&primary)
        .unwrap()
        .handle(now, wall, Input::ClientOp(Box::new(cop)));
    c.tid
}

/// `Cluster::run`, but every rep op arrives in tracked receive buffers (front, middle and data each a slice of
/// its own buffer, as msgr2 hands out segments).
fn run_tracked(c: &mut Cluster, flags: &mut Vec<(String, Freed)>) {
    for _ in 0..100_000 {
        let mut any = c.drain_outputs();
        any |= c.pump_stores();
        while let Some((from, to, mut msg)) = c.bus.pop_front() {
            any = true;
            if msg.msg_type == rep_msg::REPOP {
                let what = format!("rep op tid {} osd.{from} -> osd.{to}", msg.tid);
                msg.front = rx_buffer(&msg.front, flags, format!("{what} front"));
                msg.middle = rx_buffer(&msg.middle, flags, format!("{what} middle"));
                msg.data = rx_buffer(&msg.data, flags, format!("{what} data"));
            }
            let (now, wall) = (c.now, c.wall);
            if let Some(s) = c.osds.get_mut(&to) {
                s.handle(now, wall, Input::Peer { from, msg });
            }
        }
        if !any {
            return;
        }
    }
    panic!("cluster never settled");
}

fn assert_all_freed(flags: &[(String, Freed)]) {
    let alive: Vec<&str> = flags
        .iter()
        .filter(|(_, f)| !f.is_freed())
        .map(|(w, _)| w.as_str())
        .collect();
    assert!(
        alive.is_empty(),
        "{} of {} receive buffers are still alive after their writes completed, e.g. {:?}",
        alive.len(),
        flags.len(),
        &alive[..alive.len().min(6)]
    );
}

#[test]
fn size3_writes_keep_no_message_alive_on_primary_or_replicas() {
    let mut c = Cluster::new(3, 3, 2, 4);
    let mut flags = Vec::new();
    let mut tids = Vec::new();
    for round in 0..3 {
        for i in 0..8 {
            let name = format!("obj-{i}");
            let data = vec![round as u8 + 1; 4096];
            tids.push(send_write(&mut c, &name, &data, &mut flags));
            run_tracked(&mut c, &mut flags);
        }
    }
    for t in &tids {
        let r = c
            .reply(*t)
            .unwrap_or_else(|| panic!("write {t} was not acknowledged"));
        assert_eq!(r.result, 0, "write {t}");
    }
    let rep_ops = flags.iter().filter(|(w, _)| w.starts_with("rep op")).count();
    assert!(
        rep_ops >= 3 * 2 * 24,
        "every write went to two replicas ({rep_ops} rep op buffers)"
    );
    // what the test harness itself keeps: the replies (they carry the request's object name)
    c.replies.clear();
    assert!(c.bus.is_empty());
    assert_all_freed(&flags);
}
