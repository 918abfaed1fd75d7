// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! Real client traffic: every MOSDOp, MOSDOpReply and MWatchNotify in the crc-mode capture of a Pacific 16.2.15
//! cluster (../shared/captures/crc/crc.pcap.xz: rados put/get/stat/xattrs/omap/append/truncate/ls/rm,
//! watch/notify, cls lock, rados bench) decodes with ceph-msgs' osd_op module and re-encodes to identical front
//! and data segments. Skips (with a message) if the capture or `xz` is absent.

mod common;

use std::collections::BTreeMap;

use ceph_msgs::CephMessage;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify, op, osd_msg_type};
use common::{messages, read_capture};

#[test]
fn client_ops_replies_and_notifies_reencode_identically() {
    let Some(cap) = read_capture() else { return };
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut op_codes: BTreeMap<&'static str, usize> = BTreeMap::new();
    for s in cap
        .connections()
        .iter()
        .flat_map(|c| [&c.to_server, &c.to_client])
    {
        for m in messages(s) {
            match m.msg_type {
                osd_msg_type::OSD_OP => {
                    let o = MOSDOp::decode_message(&m).unwrap_or_else(|e| panic!("MOSDOp: {e}"));
                    let back = o.encode_message(u64::MAX);
                    assert_eq!(back.front, m.front, "MOSDOp front {o:?}");
                    assert_eq!(back.data, m.data, "MOSDOp data");
                    assert_eq!((back.version, back.compat_version), (m.version, m.compat_version));
                    for x in &o.ops {
                        *op_codes.entry(op::name(x.op)).or_default() += 1;
                    }
                    *counts.entry("osd_op").or_default() += 1;
                }
                osd_msg_type::OSD_OPREPLY => {
                    let o = MOSDOpReply::decode_message(&m).unwrap_or_else(|e| panic!("MOSDOpReply: {e}"));
                    let back = o.encode_message(u64::MAX);
                    assert_eq!(back.front, m.front, "MOSDOpReply front {o:?}");
                    assert_eq!(back.data, m.data, "MOSDOpReply data");
                    assert_eq!((back.version, back.compat_version), (m.version, m.compat_version));
                    *counts.entry("osd_op_reply").or_default() += 1;
                }
                osd_msg_type::WATCH_NOTIFY => {
                    let o = MWatchNotify::from_message(&m).unwrap();
                    let back = o.to_message(u64::MAX);
                    assert_eq!(back.front, m.front, "MWatchNotify {o:?}");
                    assert_eq!(back.data, m.data);
                    assert_eq!((back.version, back.compat_version), (m.version, m.compat_version));
                    *counts.entry("watch_notify").or_default() += 1;
                }
                _ => {}
            }
        }
    }
    eprintln!("messages: {counts:?}\nop codes: {op_codes:?}");
    assert!(counts.get("osd_op").copied().unwrap_or(0) > 50, "{counts:?}");
    assert!(
        counts.get("osd_op_reply").copied().unwrap_or(0) > 50,
        "{counts:?}"
    );
    assert!(counts.contains_key("watch_notify"), "{counts:?}");
    for name in [
        "write",
        "read",
        "stat",
        "setxattr",
        "getxattr",
        "omap-set-vals",
        "call",
        "watch",
        "notify",
        "pgnls",
    ] {
        assert!(
            op_codes.contains_key(name),
            "no {name} op in the capture: {op_codes:?}"
        );
    }
}
