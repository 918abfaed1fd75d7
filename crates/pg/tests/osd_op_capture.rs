// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used)] // test harness: a panic is the failure report
//! Real client traffic: every MOSDOp, MOSDOpReply and MWatchNotify in the crc-mode capture of a Pacific 16.2.15
//! cluster (../shared/captures/crc/crc.pcap.xz: rados put/get/stat/xattrs/omap/append/truncate/ls/rm,
//! watch/notify, cls lock, rados bench) decodes with ceph-msgs' osd_op module and re-encodes to identical front
//! and data segments. Skips (with a message) if the capture or `xz` is absent.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use ceph_msgs::CephMessage;
use ceph_msgs::osd_op::{MOSDOp, MOSDOpReply, MWatchNotify, op, osd_msg_type};
use msgr2::frame::{FrameDecoder, FrameLimits};

const MESSAGE_TAG: u8 = 17;

fn read_capture() -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures/crc/crc.pcap.xz");
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return None;
    }
    match std::process::Command::new("xz").arg("-dc").arg(&path).output() {
        Ok(o) if o.status.success() => Some(o.stdout),
        Ok(o) => panic!("xz failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("skipping: cannot run xz ({e})");
            None
        }
    }
}

type Endpoint = ([u8; 4], u16);

/// One direction of one TCP connection: (relative seq, payload) segments.
#[derive(Default)]
struct Stream {
    isn: u32,
    segments: Vec<(u32, Vec<u8>)>,
}

impl Stream {
    fn bytes(&self) -> Vec<u8> {
        let mut segs: Vec<(u64, &[u8])> = self
            .segments
            .iter()
            .map(|(s, d)| (u64::from(s.wrapping_sub(self.isn)), d.as_slice()))
            .collect();
        segs.sort_by_key(|s| s.0);
        let mut out = Vec::new();
        let mut next = 0u64;
        for (rel, d) in segs {
            let end = rel + d.len() as u64;
            if end <= next {
                continue;
            }
            if rel > next {
                break; // a packet missing from the capture: stop at the gap
            }
            out.extend_from_slice(&d[(next - rel) as usize..]);
            next = end;
        }
        out
    }
}

/// Little-endian pcap, Ethernet / cooked / raw IPv4, TCP only.
fn tcp_streams(pcap: &[u8]) -> Vec<Stream> {
    let linktype = u32::from_le_bytes(pcap[20..24].try_into().unwrap());
    let l2 = match linktype {
        1 => 14,
        113 => 16,
        101 => 0,
        0 => 4,
        t => panic!("unsupported link type {t}"),
    };
    let mut streams = Vec::new();
    let mut current: HashMap<(Endpoint, Endpoint), usize> = HashMap::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let incl = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let pkt = &pcap[at + 16..(at + 16 + incl).min(pcap.len())];
        at += 16 + incl;
        let Some(ip) = pkt.get(l2..) else { continue };
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 6 {
            continue;
        }
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
        let Some(tcp) = ip.get(ihl..total) else { continue };
        if tcp.len() < 20 {
            continue;
        }
        let key = (
            (
                ip[12..16].try_into().unwrap(),
                u16::from_be_bytes([tcp[0], tcp[1]]),
            ),
            (
                ip[16..20].try_into().unwrap(),
                u16::from_be_bytes([tcp[2], tcp[3]]),
            ),
        );
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        let doff = usize::from(tcp[12] >> 4) * 4;
        if tcp[13] & 0x02 != 0 {
            streams.push(Stream {
                isn: seq.wrapping_add(1),
                segments: Vec::new(),
            });
            current.insert(key, streams.len() - 1);
            continue;
        }
        let Some(payload) = tcp.get(doff..) else { continue };
        if let Some(&i) = current.get(&key)
            && !payload.is_empty()
        {
            streams[i].segments.push((seq, payload.to_vec()));
        }
    }
    streams
}

fn messages(raw: &[u8]) -> Vec<ceph_msgs::Message> {
    if raw.len() < 10 || &raw[..8] != b"ceph v2\n" {
        return Vec::new();
    }
    let banner_len = u16::from_le_bytes([raw[8], raw[9]]) as usize;
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&raw[10 + banner_len..]);
    let mut out = Vec::new();
    while let Ok(Some(f)) = dec.next_frame() {
        if f.tag == MESSAGE_TAG {
            let m = msgr2::Message::from_segments(&f.segments).unwrap();
            out.push(ceph_msgs::Message {
                msg_type: m.msg_type,
                version: m.version,
                compat_version: m.compat_version,
                priority: m.priority,
                tid: m.tid,
                front: m.front,
                middle: m.middle,
                data: m.data,
            });
        }
    }
    out
}

#[test]
fn client_ops_replies_and_notifies_reencode_identically() {
    let Some(pcap) = read_capture() else { return };
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut op_codes: BTreeMap<&'static str, usize> = BTreeMap::new();
    for s in tcp_streams(&pcap) {
        for m in messages(&s.bytes()) {
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
