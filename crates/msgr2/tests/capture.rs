// SPDX-License-Identifier: LGPL-3.0-or-later
//! Real traffic: every msgr2 stream in the crc-mode capture of a Ceph 16.2.15 cluster
//! (../shared/captures/crc/crc.pcap.xz) must parse frame by frame with valid crcs; banners, HELLO, auth and
//! ident payloads must decode and re-encode to the same bytes, and MESSAGE frames must re-encode to identical
//! wire bytes. Skips (with a message) if the capture or the `xz` tool is absent.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;
use ceph_capture::{Capture, Stream};
use msgr2::control::{BANNER_PREFIX, Control};
use msgr2::frame::{FrameDecoder, FrameLimits, Tag, concat, encode_frame};
use msgr2::message::Message;

#[derive(Default, Debug)]
struct Summary {
    streams: usize,
    frames: BTreeMap<&'static str, usize>,
    messages_by_type: BTreeMap<u16, usize>,
    message_bytes: usize,
    partial_tail_streams: usize,
}

/// Parse one direction of a msgr2 stream in crc mode, checking everything we can. Returns false if the stream is
/// not msgr2.
fn check_stream(data: &[u8], what: &str, sum: &mut Summary) -> bool {
    if data.len() < 26 || &data[..8] != BANNER_PREFIX {
        return false;
    }
    sum.streams += 1;
    assert_eq!(
        u16::from_le_bytes([data[8], data[9]]),
        16,
        "{what}: banner length"
    );
    let supported = u64::from_le_bytes(data[10..18].try_into().unwrap());
    let required = u64::from_le_bytes(data[18..26].try_into().unwrap());
    assert_eq!(
        (supported, required),
        (1, 0),
        "{what}: Pacific banner advertises rev1, requires nothing"
    );
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&data[26..]);
    let mut first = true;
    loop {
        let f = match dec.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => panic!("{what}: frame error after {:?}: {e}", sum.frames),
        };
        let tag = f.tag().unwrap_or_else(|| panic!("{what}: unknown tag {}", f.tag));
        *sum.frames.entry(tag.name()).or_default() += 1;
        if first {
            assert_eq!(tag, Tag::Hello, "{what}: the first frame is HELLO");
            first = false;
        }
        let raw = f.raw.clone().unwrap();
        let n = f.preamble.num_segments as usize;
        let aligns: Vec<u16> = f.preamble.segments[..n].iter().map(|s| s.align).collect();
        if tag == Tag::Message {
            let m = Message::from_segments(&f.segments).unwrap();
            *sum.messages_by_type.entry(m.msg_type).or_default() += 1;
            sum.message_bytes += m.payload_len();
            assert_eq!(
                aligns,
                msgr2::message::MESSAGE_ALIGNS[..n].to_vec(),
                "{what}: message alignments"
            );
            // Re-encode from the parsed message: identical bytes.
            let segs = m.segments();
            let again = concat(&encode_frame(None, Tag::Message, &segs[..n], &aligns).unwrap());
            assert_eq!(
                again, raw,
                "{what}: MESSAGE type {} seq {} re-encodes differently",
                m.msg_type, m.seq
            );
        } else {
            assert_eq!(n, 1, "{what}: control frames have one segment");
            assert_eq!(aligns, vec![8], "{what}: control alignment");
            let ctl = Control::decode(tag, f.segments[0].clone())
                .unwrap_or_else(|e| panic!("{what}: {tag:?} payload does not decode: {e}"));
            // Our encoding of the decoded payload is byte-identical to Ceph's.
            assert_eq!(
                ctl.encode(),
                f.segments[0],
                "{what}: {tag:?} payload re-encodes differently: {ctl:?}"
            );
            let again = concat(&encode_frame(None, tag, &[ctl.encode()], &[8]).unwrap());
            assert_eq!(again, raw, "{what}: {tag:?} frame re-encodes differently");
            if let Control::ClientIdent(ci) = &ctl {
                assert_eq!(
                    ci.supported_features,
                    msgr2::connection::PACIFIC_FEATURES,
                    "{what}"
                );
            }
            if let Control::ServerIdent(si) = &ctl {
                assert_eq!(
                    si.supported_features,
                    msgr2::connection::PACIFIC_FEATURES,
                    "{what}"
                );
            }
        }
        let _ = Bytes::new();
    }
    if dec.buffered() > 0 {
        sum.partial_tail_streams += 1;
    }
    true
}

/// Both directions of every TCP connection in the capture, with the role of the side that sent them and a name.
fn directions(cap: &Capture) -> Vec<(&Stream, msgr2::frame::Role, String)> {
    let mut v = Vec::new();
    for c in cap.connections() {
        v.push((
            &c.to_server,
            msgr2::frame::Role::Connector,
            format!("{} -> {} (connector)", c.client, c.server),
        ));
        v.push((
            &c.to_client,
            msgr2::frame::Role::Acceptor,
            format!("{} -> {} (acceptor)", c.server, c.client),
        ));
    }
    v
}

#[test]
fn crc_capture_parses_and_reencodes() {
    let Some(cap) = ceph_capture::load("crc") else {
        return;
    };
    let streams = directions(&cap);
    let mut sum = Summary::default();
    let mut gaps = 0;
    for (s, _, what) in &streams {
        if s.has_gap() {
            gaps += 1;
        }
        check_stream(s.bytes(), what, &mut sum);
    }
    eprintln!(
        "{} TCP directions, {} msgr2 streams, {} with a partial frame at capture end, {} with capture gaps",
        streams.len(),
        sum.streams,
        sum.partial_tail_streams,
        gaps
    );
    eprintln!("frames: {:?}", sum.frames);
    eprintln!(
        "message types: {:?}, payload bytes {}",
        sum.messages_by_type, sum.message_bytes
    );
    assert!(
        sum.streams >= 20,
        "expected many msgr2 streams, got {}",
        sum.streams
    );
    for t in [
        "HELLO",
        "AUTH_REQUEST",
        "AUTH_DONE",
        "AUTH_SIGNATURE",
        "CLIENT_IDENT",
        "SERVER_IDENT",
        "MESSAGE",
        "ACK",
    ] {
        assert!(sum.frames.get(t).copied().unwrap_or(0) > 0, "no {t} frame seen");
    }
    assert!(sum.messages_by_type.len() > 20, "many message types");
}

/// A small fixture extracted from the capture (the start of a client→mon session) so the parsing test also
/// runs where ../shared is absent.
#[test]
fn fixture_session_start_parses() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut sum = Summary::default();
    for name in ["mon-session-c2s.bin", "mon-session-s2c.bin"] {
        let data = std::fs::read(dir.join(name)).unwrap();
        assert!(check_stream(&data, name, &mut sum), "{name} is not msgr2");
    }
    assert!(
        sum.frames["HELLO"] == 2 && sum.frames["AUTH_REQUEST"] >= 1 && sum.frames["AUTH_DONE"] == 1,
        "{:?}",
        sum.frames
    );
}

/// The replay reader finds where the pre-auth bytes end: right before this side's AUTH_SIGNATURE (crc mode).
#[test]
fn crc_capture_pre_auth_boundaries() {
    let Some(cap) = ceph_capture::load("crc") else {
        return;
    };
    let mut checked = 0;
    for (s, role, _) in directions(&cap) {
        let Ok(sf) = msgr2::replay::parse_stream(s.bytes(), role, None) else {
            continue;
        };
        let Some(k) = sf.switched_at else { continue };
        let sig = &sf.frames[k];
        assert_eq!(sig.tag(), Some(Tag::AuthSignature));
        // pre_auth_len = banner + every frame before the signature.
        let before: usize = 26
            + sf.frames[..k]
                .iter()
                .map(|f| f.raw.as_ref().unwrap().len())
                .sum::<usize>();
        assert_eq!(sf.pre_auth_len, before);
        // cephx sessions sign with a real key: the HMAC is not all zeros.
        assert_ne!(sig.segments[0].as_ref(), &[0u8; 32][..]);
        assert_eq!(sf.trailing, 0);
        checked += 1;
    }
    assert!(checked >= 700, "checked {checked}");
}

/// Secure capture: without the connection secret, streams parse up to the mode switch, and the acceptor's
/// AUTH_DONE says secure mode. (Decrypting the rest needs the cephx-derived secret: see crates/cephx.)
#[test]
fn secure_capture_parses_until_the_switch() {
    let Some(cap) = ceph_capture::load("secure") else {
        return;
    };
    let (mut streams, mut secure_sessions) = (0, 0);
    for (s, role, _) in directions(&cap) {
        let Ok(sf) = msgr2::replay::parse_stream(s.bytes(), role, None) else {
            continue;
        };
        streams += 1;
        assert_eq!(sf.frames[0].tag(), Some(Tag::Hello));
        for f in &sf.frames[..sf.switched_at.unwrap_or(sf.frames.len())] {
            let tag = f.tag().unwrap();
            let c = Control::decode(tag, f.segments[0].clone()).unwrap();
            assert_eq!(c.encode(), f.segments[0]);
            if let Control::AuthDone { con_mode: 2, .. } = c {
                secure_sessions += 1;
                assert!(
                    sf.trailing > 0,
                    "secure frames follow and stay unparsed without the secret"
                );
            }
        }
    }
    eprintln!("{streams} msgr2 streams, {secure_sessions} secure sessions");
    assert!(
        streams > 10 && secure_sessions > 5,
        "{streams} streams, {secure_sessions} secure"
    );
}
