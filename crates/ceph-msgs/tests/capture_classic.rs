// SPDX-License-Identifier: LGPL-3.0-or-later
//! Real Pacific 16.2.15 traffic between classic daemons, captured passively on loopback in msgr2 crc mode by
//! `scripts/capture-classic.sh` and trimmed to the committed fixture `testdata/classic.pcap.xz` (client↔OSD,
//! OSD↔OSD, OSD↔mon/mgr: ops, replication, peering, recovery, backfill, EC sub-ops, scrub).
//!
//! Every msgr2 frame of every stream must decode (crc checked); every message of a type this crate implements
//! must decode and re-encode to the same front, middle and data bytes with the same header version and compat
//! version. A per-type table is printed; types seen but not implemented are listed. The big shared capture
//! (`../shared/captures/crc`) runs through the same check when it is present. `FERRO_CLASSIC_CAPTURE=FILE` checks
//! another capture (pcap or pcap.xz, e.g. a fresh one) in place of the fixture.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::Path;

use ceph_msgs::log::*;
use ceph_msgs::osd::*;
use ceph_msgs::osd_ec::*;
use ceph_msgs::osd_op::*;
use ceph_msgs::osd_rep::*;
use ceph_msgs::osd_scrub::*;
use ceph_msgs::*;
use msgr2::frame::{FrameDecoder, FrameLimits, Tag};

/// Every message of `cap`, with the number of frames (of any tag) decoded. Panics on a frame that does not
/// decode: the fixture holds complete, crc-valid streams.
fn messages(cap: &ceph_capture::Capture, strict: bool) -> (Vec<Message>, usize) {
    let mut out = Vec::new();
    let mut frames = 0;
    for c in cap.connections() {
        for s in [&c.to_server, &c.to_client] {
            let raw = s.bytes();
            let Some(at) = ceph_capture::msgr2_frames_start(raw) else {
                assert!(!strict || raw.is_empty(), "{c:?}: no msgr2 banner");
                continue;
            };
            let mut dec = FrameDecoder::new(FrameLimits::default());
            dec.push(&raw[at..]);
            loop {
                match dec.next_frame() {
                    Ok(Some(f)) => {
                        frames += 1;
                        if f.tag() != Some(Tag::Message) {
                            continue;
                        }
                        let m = msgr2::Message::from_segments(&f.segments).unwrap();
                        out.push(Message {
                            msg_type: m.msg_type,
                            version: m.version,
                            compat_version: m.compat_version,
                            priority: m.priority,
                            tid: m.tid,
                            front: m.front,
                            middle: m.middle,
                            data: m.data,
                            ..Default::default()
                        });
                    }
                    Ok(None) => {
                        assert!(
                            !strict || dec.buffered() == 0,
                            "{c:?}: {} bytes of a partial frame",
                            dec.buffered()
                        );
                        break;
                    }
                    Err(e) => {
                        assert!(!strict, "{c:?}: frame error {e}");
                        break;
                    }
                }
            }
        }
    }
    (out, frames)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decode and re-encode; `Err` describes the first difference.
fn roundtrip<T: CephMessage + std::fmt::Debug>(m: &Message) -> Result<(&'static str, u16), String> {
    let t = T::from_message(m)
        .map_err(|e| format!("{}: {e}\n  v{} front {}", T::NAME, m.version, hex(&m.front)))?;
    let back = t.to_message(denc::CEPH_FEATURES_ALL);
    // client ops and replies are encoded in one allocation
    if [osd_msg_type::OSD_OP, osd_msg_type::OSD_OPREPLY].contains(&T::TYPE)
        && t.front_capacity() < m.front.len()
    {
        return Err(format!(
            "{}: front capacity {} < {} bytes",
            T::NAME,
            t.front_capacity(),
            m.front.len()
        ));
    }
    if back.front != m.front {
        return Err(format!(
            "{} v{}: front differs\n  got  {}\n  want {}\n  {t:?}",
            T::NAME,
            m.version,
            hex(&back.front),
            hex(&m.front)
        ));
    }
    if back.middle != m.middle {
        return Err(format!("{}: middle differs", T::NAME));
    }
    if back.data != m.data {
        return Err(format!(
            "{}: data differs ({} vs {} bytes)",
            T::NAME,
            back.data.len(),
            m.data.len()
        ));
    }
    if (back.version, back.compat_version) != (m.version, m.compat_version) {
        return Err(format!(
            "{}: header version {}/{} vs {}/{}",
            T::NAME,
            back.version,
            back.compat_version,
            m.version,
            m.compat_version
        ));
    }
    Ok((T::NAME, T::PRIORITY))
}

macro_rules! dispatch {
    ($m:expr; $($t:ty),* $(,)?) => {{
        let m: &Message = $m;
        $( if m.msg_type == <$t as CephMessage>::TYPE { return Some(roundtrip::<$t>(m)); } )*
        None
    }};
}

/// The round trip of `m` if its type is implemented here.
fn check(m: &Message) -> Option<Result<(&'static str, u16), String>> {
    dispatch!(m;
        // mon / mgr clients
        MMonMap, MMonGetMap, MMonSubscribe, MMonSubscribeAck, MMonGetVersion, MMonGetVersionReply, MMonCommand,
        MMonCommandAck, MConfig, MAuth, MAuthReply, MMgrMap, MOSDMap, MLog, MLogAck, MMgrCommand, MMgrCommandReply,
        // OSD ↔ mon / mgr
        MOSDBoot, MOSDAlive, MOSDBeacon, MOSDMarkMeDown, MOSDPGCreated, MPGStats, MMgrOpen, MMgrConfigure,
        MMgrReport, MOSDPing, MCommand, MCommandReply,
        MOSDFailure, MOSDPGTemp, MOSDScrub2, MOSDForceRecovery, MOSDPGCreate2, MOSDFull,
        // client ↔ OSD
        MOSDOp, MOSDOpReply, MWatchNotify, MOSDBackoff,
        // OSD ↔ OSD
        MOSDRepOp, MOSDRepOpReply, MOSDPGNotify2, MOSDPGQuery2, MOSDPGInfo2, MOSDPGLog, MOSDPGLease, MOSDPGLeaseAck,
        MOSDPGTrim, MOSDPGPush, MOSDPGPull, MOSDPGPushReply, MOSDPGScan, MOSDPGBackfill, MOSDPGBackfillRemove,
        MOSDPGRecoveryDelete, MOSDPGRecoveryDeleteReply, MOSDPGUpdateLogMissing, MOSDPGUpdateLogMissingReply,
        MOSDPGNotify, MOSDPGRemove, MRecoveryReserve, MBackfillReserve,
        MOSDECSubOpWrite, MOSDECSubOpWriteReply, MOSDECSubOpRead, MOSDECSubOpReadReply,
        MOSDScrubReserve, MOSDRepScrub, MOSDRepScrubMap,
    )
}

#[derive(Default)]
struct Row {
    name: &'static str,
    ok: usize,
    bad: usize,
    versions: BTreeMap<u16, usize>,
    /// Priorities seen (informational: some senders use the op's priority, not the type's default).
    prios: BTreeMap<u16, usize>,
    /// The type's `CephMessage::PRIORITY` (what we send by default).
    our_prio: u16,
}

/// Checks every message; returns the table (type → row), unimplemented types (type → count) and failures.
fn check_all(all: &[Message]) -> (BTreeMap<u16, Row>, BTreeMap<u16, usize>, Vec<String>) {
    let mut rows: BTreeMap<u16, Row> = BTreeMap::new();
    let mut missing: BTreeMap<u16, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for m in all {
        match check(m) {
            None => *missing.entry(m.msg_type).or_default() += 1,
            Some(r) => {
                let row = rows.entry(m.msg_type).or_default();
                *row.versions.entry(m.version).or_default() += 1;
                *row.prios.entry(m.priority).or_default() += 1;
                match r {
                    Ok((name, prio)) => {
                        row.name = name;
                        row.our_prio = prio;
                        row.ok += 1;
                    }
                    Err(e) => {
                        row.bad += 1;
                        if failures.len() < 20 {
                            failures.push(e);
                        }
                    }
                }
            }
        }
    }
    (rows, missing, failures)
}

fn print_table(
    what: &str,
    frames: usize,
    all: &[Message],
    rows: &BTreeMap<u16, Row>,
    missing: &BTreeMap<u16, usize>,
) {
    eprintln!("{what}: {frames} frames, {} messages", all.len());
    eprintln!(
        "  {:>6}  {:<28} {:>6} {:>6}  versions / priorities seen (ours)",
        "type", "name", "same", "differ"
    );
    for (ty, r) in rows {
        eprintln!(
            "  {ty:>6}  {:<28} {:>6} {:>6}  {:?} / {:?} ({})",
            r.name, r.ok, r.bad, r.versions, r.prios, r.our_prio
        );
    }
    eprintln!("  not implemented (type: count): {missing:?}");
}

/// Env var: check this capture (e.g. a fresh one from scripts/capture-classic.sh) instead of the committed fixture.
const CAPTURE_ENV: &str = "FERRO_CLASSIC_CAPTURE";

fn fixture_path(name: &str) -> std::path::PathBuf {
    match std::env::var_os(CAPTURE_ENV) {
        Some(p) => std::path::PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name),
    }
}

fn fixture(name: &str) -> ceph_capture::Capture {
    let path = fixture_path(name);
    // The fixture is committed; only a missing `xz` tool makes it unreadable.
    match ceph_capture::Capture::read(&path) {
        Some(c) => c,
        None => panic!("{}: cannot read (is xz installed?)", path.display()),
    }
}

/// Types the committed fixture must contain (a scenario regression in the capture script shows up here).
const EXPECTED_IN_FIXTURE: &[&str] = &[
    "osd_op",
    "osd_op_reply",
    "watch-notify",
    "osd_repop",
    "osd_repop_reply",
    "pg_notify2",
    "pg_query2",
    "pg_info2",
    "PGlog",
    "pg_lease",
    "pg_lease_ack",
    "MOSDPGPush",
    "MOSDPGPushReply",
    "MOSDPGPull",
    "MRecoveryReserve",
    "MOSDECSubOpWrite",
    "MOSDECSubOpWriteReply",
    "MOSDECSubOpRead",
    "MOSDECSubOpReadReply",
    "MOSDScrubReserve",
    "replica scrub",
    "rep_scrubmap",
    "osd_failure",
    "osd_pgtemp",
    "osd_map",
    "pg_scan",
    "pg_backfill",
    "MBackfillReserve",
    "recovery_delete",
    "recovery_delete_reply",
    "PGUpdateLogMissing",
    "PGUpdateLogMissingReply",
    "scrub2",
    "force_recovery",
    "pg_create2",
];

#[test]
fn classic_fixture_frames_decode_and_messages_reencode_identically() {
    let cap = fixture("classic.pcap.xz");
    let (all, frames) = messages(&cap, true);
    let (rows, missing, failures) = check_all(&all);
    let label = fixture_path("classic.pcap.xz").display().to_string();
    print_table(&label, frames, &all, &rows, &missing);
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Where Ceph always used one priority for a type, ours is that one (types sent at the client op's or the
    // recovery op's priority are exempt).
    const OP_PRIORITY: &[&str] = &[
        "osd_op",
        "MOSDPGPush",
        "MOSDPGPull",
        "MOSDPGPushReply",
        "MOSDECSubOpRead",
        "recovery_delete",
        "recovery_delete_reply",
    ];
    for r in rows.values().filter(|r| !OP_PRIORITY.contains(&r.name)) {
        if let [(&seen, _)] = r.prios.iter().collect::<Vec<_>>()[..] {
            assert_eq!(
                r.our_prio, seen,
                "{}: Ceph sent priority {seen}, we send {}",
                r.name, r.our_prio
            );
        }
    }
    let names: Vec<&str> = rows.values().map(|r| r.name).collect();
    for want in EXPECTED_IN_FIXTURE {
        assert!(names.contains(want), "{want} not in the fixture: {names:?}");
    }
}

#[test]
fn shared_crc_capture_reencodes_identically() {
    let Some(cap) = ceph_capture::load("crc") else {
        return;
    };
    let (all, frames) = messages(&cap, false);
    let (rows, missing, failures) = check_all(&all);
    print_table("../shared/captures/crc", frames, &all, &rows, &missing);
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Hostile input: every truncation of every fixture message of an implemented type is an error or a value,
/// never a panic.
#[test]
fn truncated_fixture_messages_do_not_panic() {
    let cap = fixture("classic.pcap.xz");
    let (all, _) = messages(&cap, true);
    let mut tried = 0;
    for m in all.iter().filter(|m| m.front.len() < 4096) {
        for cut in (0..m.front.len()).step_by(5) {
            let mut t = m.clone();
            t.front = m.front.slice(..cut);
            let _ = check(&t);
            tried += 1;
        }
    }
    eprintln!("{tried} truncations decoded without panicking");
}

/// The scrub maps inside `rep_scrubmap` messages (the data segment) decode into typed objects and re-encode to the
/// same bytes; deep-scrub digests are among them.
#[test]
fn scrub_maps_reencode_identically() {
    let cap = fixture("classic.pcap.xz");
    let (mut all, _) = messages(&cap, true);
    if let Some(shared) = ceph_capture::load("crc") {
        all.extend(messages(&shared, false).0);
    }
    let (mut maps, mut objects, mut deep) = (0, 0, 0);
    for m in all.iter().filter(|m| m.msg_type == MOSDRepScrubMap::TYPE) {
        let r = MOSDRepScrubMap::from_message(m).unwrap();
        let map = r
            .decode_scrub_map()
            .unwrap_or_else(|e| panic!("{e}: {}", hex(&r.scrub_map)));
        let mut again = r.clone();
        again.set_scrub_map(&map);
        assert_eq!(again.scrub_map, r.scrub_map, "{map:?}");
        maps += 1;
        objects += map.objects.len();
        deep += map.objects.iter().filter(|(_, o)| o.digest_present).count();
        for (_, o) in &map.objects {
            assert!(
                o.attrs.iter().any(|(k, _)| &k[..] == b"_"),
                "every object has its object_info_t"
            );
        }
    }
    eprintln!("{maps} scrub maps, {objects} objects, {deep} with a data digest (deep scrub)");
    assert!(maps > 0 && objects > 0 && deep > 0, "{maps} {objects} {deep}");
}
