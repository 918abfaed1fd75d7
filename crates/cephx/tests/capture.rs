// SPDX-License-Identifier: LGPL-3.0-or-later
//! Proof against real Ceph 16.2.15: replay the cephx exchanges of `../shared/captures/secure` (msgr2 secure mode)
//! with nothing but the cluster's keyrings.
//!
//! * Every client.admin/osd.0 authentication with the monitor: our key proof equals the one the real client sent,
//!   our client opens the real AUTH_DONE (session key, 64-byte connection secret, extra service tickets), and the
//!   first secure frame each way is an AUTH_SIGNATURE whose HMAC (keyed by our session key) matches.
//! * osd.0's CEPHX_GET_ROTATING_KEY reply (inside the encrypted mon session) opens with osd.0's key.
//! * Every client → OSD authorizer: our service side opens the real ticket with those rotating keys; our client
//!   side answers the real OSD challenge exactly as the real client did, verifies the OSD's reply (nonce + 1) and
//!   extracts the connection secret, with which the client's MOSDOp decrypts to the known `hello ferro\n`.
//!
//! Streams come from `ceph-capture` (pcap + TCP reassembly), frames from msgr2's own `FrameDecoder` (crc and
//! secure mode, CRCs and GCM tags checked).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use ceph_capture::{Connection, msgr2_frames_start};
use cephx::client::MonAuthClient;
use cephx::crypto::{decode_decrypt, decrypt_enc_bl};
use cephx::service::{ServiceAuthorizerVerifier, ServiceKeys, ServiceStep};
use cephx::*;
use denc::{Decode, Decoder};
use msgr2::frame::{Frame, FrameDecoder, FrameLimits, Role, SecureRx};

// ---------------------------------------------------------------------------------------------------------------
// msgr2 rev1 frames

const TAG_AUTH_REQUEST: u8 = 2;
const TAG_AUTH_REPLY_MORE: u8 = 4;
const TAG_AUTH_REQUEST_MORE: u8 = 5;
const TAG_AUTH_DONE: u8 = 6;
const TAG_AUTH_SIGNATURE: u8 = 7;
const TAG_MESSAGE: u8 = 17;

/// The plain (pre-auth) part of a stream: banner then frames up to and including the last auth frame of this
/// direction. Returns the frames and the offset where encrypted frames start.
fn plain_part(s: &[u8], last_tags: &[u8]) -> (Vec<Frame>, usize) {
    let start = msgr2_frames_start(s).expect("an msgr2 stream");
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&s[start..]);
    let mut frames = Vec::new();
    while let Ok(Some(f)) = dec.next_frame() {
        let done = last_tags.contains(&f.tag);
        frames.push(f);
        if done {
            break;
        }
    }
    (frames, s.len() - dec.buffered())
}

/// Up to `max` secure-mode frames from `pos`, decrypted with the connection secret; `receiver` is the side that
/// received this direction.
fn secure_frames(s: &[u8], pos: usize, secret: &[u8], receiver: Role, max: usize) -> Vec<Frame> {
    let rx = SecureRx::new(&msgr2::crypto::AwsLc, secret, receiver).unwrap();
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.set_secure(Some(rx));
    dec.push(&s[pos..]);
    let mut out = Vec::new();
    while out.len() < max {
        match dec.next_frame() {
            Ok(Some(f)) => out.push(f),
            _ => break,
        }
    }
    out
}

/// Every crc-mode frame of a stream (empty for a stream that is not msgr2).
fn all_plain_frames(s: &[u8]) -> Vec<Frame> {
    let Some(start) = msgr2_frames_start(s) else {
        return Vec::new();
    };
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&s[start..]);
    let mut out = Vec::new();
    while let Ok(Some(f)) = dec.next_frame() {
        out.push(f);
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------

fn keyring_key(path: &Path, name: &str) -> CryptoKey {
    let text = std::fs::read_to_string(path).unwrap();
    let keyring = ceph_config::Keyring::parse(&text, &path.display().to_string()).unwrap();
    CryptoKey::from_base64(keyring.key_of(name).unwrap()).unwrap()
}

fn bl(frame: &Frame, skip: usize) -> Bytes {
    let mut d = Decoder::new(frame.segments[0].slice(skip..));
    d.bufferlist().unwrap()
}

/// What a verified mon session gives us.
struct MonAuthResult {
    client: MonAuthClient,
    global_id: u64,
}

#[test]
fn secure_capture_cephx_end_to_end() {
    let (Some(dir), Some(cap)) = (ceph_capture::capture_dir("secure"), ceph_capture::load("secure")) else {
        return;
    };
    let conns: Vec<&Connection> = cap.connections().iter().collect();
    let p: Arc<dyn CryptoProvider> = Arc::new(AwsLcProvider);
    let keys: BTreeMap<String, CryptoKey> = [
        ("client.admin", "keyring.admin-and-mon"),
        ("osd.0", "keyring.osd.0"),
        ("mgr.x", "keyring.mgr.x"),
    ]
    .into_iter()
    .map(|(n, f)| (n.to_string(), keyring_key(&dir.join(f), n)))
    .collect();

    let now = UTime::new(1_762_000_000, 0);
    let mut sessions: Vec<MonAuthResult> = Vec::new();
    let mut rotating: Option<RotatingSecrets> = None;
    let mut signatures = 0;
    let mut reconnects = 0;
    for c in conns.iter().filter(|c| c.server.port() == 3800) {
        let (cf, c_secure_at) = plain_part(c.to_server.bytes(), &[TAG_AUTH_REQUEST_MORE]);
        let (sf, s_secure_at) = plain_part(c.to_client.bytes(), &[TAG_AUTH_DONE]);
        let Some(req) = cf.iter().find(|f| f.tag == TAG_AUTH_REQUEST) else {
            continue;
        };
        let mut d = Decoder::new(req.segments[0].clone());
        assert_eq!(d.u32().unwrap(), 2, "cephx");
        let _modes: Vec<u32> = Vec::decode(&mut d).unwrap();
        let payload = d.bufferlist().unwrap();
        let mut pd = Decoder::new(payload.clone());
        assert_eq!(pd.u8().unwrap(), 10, "AUTH_MODE_MON");
        let name = EntityName::decode(&mut pd).unwrap();
        let Some(secret) = keys.get(&name.to_string()) else {
            continue;
        };
        let challenge = bl(sf.iter().find(|f| f.tag == TAG_AUTH_REPLY_MORE).unwrap(), 0);
        let more = bl(cf.iter().find(|f| f.tag == TAG_AUTH_REQUEST_MORE).unwrap(), 0);
        let done = sf.iter().find(|f| f.tag == TAG_AUTH_DONE).expect("AUTH_DONE");

        // 1. The key proof the real client computed equals ours.
        let server_challenge = CephXServerChallenge::decode_all(challenge.clone())
            .unwrap()
            .server_challenge;
        let mut md = Decoder::new(more.clone());
        assert_eq!(
            CephXRequestHeader::decode(&mut md).unwrap().request_type,
            CEPHX_GET_AUTH_SESSION_KEY
        );
        let auth = CephXAuthenticate::decode(&mut md).unwrap();
        assert_eq!(auth.struct_v, 3, "16.2.15 sends CephXAuthenticate v3");
        let ours = client::calc_client_server_challenge(&*p, secret, server_challenge, auth.client_challenge)
            .unwrap();
        assert_eq!(ours, auth.key, "{name}: key proof differs from the real client's");

        // 2. Our client opens the real AUTH_DONE.
        // A reconnect (global_id != 0) continues the previous session of that entity: it presents the old AUTH
        // ticket, and the monitor seals the new ticket with the old session key.
        let claimed_gid = pd.u64().unwrap();
        let mut client = match sessions
            .iter()
            .rposition(|s| claimed_gid != 0 && s.client.name() == &name)
        {
            Some(i) => {
                reconnects += 1;
                sessions.remove(i).client
            }
            None => MonAuthClient::new(
                p.clone(),
                name.clone(),
                secret.clone(),
                ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ENTITY_TYPE_MGR,
            ),
        };
        assert_eq!(
            client.initial_request(),
            payload,
            "{name}: our AUTH_REQUEST payload equals the real one"
        );
        client.handle_reply_more(&challenge).unwrap();
        let mut dd = Decoder::new(done.segments[0].clone());
        let global_id = dd.u64().unwrap();
        let con_mode = dd.u32().unwrap();
        assert_eq!(con_mode, 2, "secure mode");
        let done_payload = dd.bufferlist().unwrap();
        let session = client.handle_done(global_id, &done_payload, now).unwrap();
        assert_eq!(session.connection_secret.len(), 64);
        let (have, _) = client.validate_tickets(now);
        // The monitor answered every service asked for in other_keys in the same reply (no MDS in this cluster).
        let asked = auth.other_keys & !ENTITY_TYPE_MDS;
        assert_eq!(
            have & asked,
            asked,
            "{name}: tickets {have:#x}, asked {:#x}",
            auth.other_keys
        );
        assert!(auth.other_keys & ENTITY_TYPE_AUTH != 0);

        // 3. The secure streams: first frame each way is AUTH_SIGNATURE = HMAC(session key, what that side received).
        let cs = &session.connection_secret;
        let c_frames = secure_frames(c.to_server.bytes(), c_secure_at, cs, Role::Acceptor, 200);
        let s_frames = secure_frames(c.to_client.bytes(), s_secure_at, cs, Role::Connector, 200);
        assert_eq!(
            c_frames.first().map(|f| f.tag),
            Some(TAG_AUTH_SIGNATURE),
            "{name}: client's first secure frame"
        );
        assert_eq!(s_frames.first().map(|f| f.tag), Some(TAG_AUTH_SIGNATURE));
        let hmac = |data: &[u8]| p.hmac_sha256(&session.session_key.secret, data);
        assert_eq!(
            &c_frames[0].segments[0][..32],
            &hmac(&c.to_client.bytes()[..s_secure_at])[..]
        );
        assert_eq!(
            &s_frames[0].segments[0][..32],
            &hmac(&c.to_server.bytes()[..c_secure_at])[..]
        );
        signatures += 2;

        // 4. osd.0's rotating keys, from MAuthReply (type 18) frames in the encrypted session.
        if name.to_string() == "osd.0" {
            for f in s_frames.iter().filter(|f| f.tag == TAG_MESSAGE) {
                let msg_type = u16::from_le_bytes(f.segments[0][16..18].try_into().unwrap());
                if msg_type != 18 {
                    continue;
                }
                let mut fd = Decoder::new(f.segments[1].clone());
                let _protocol = fd.u32().unwrap();
                let result = fd.i32().unwrap();
                let _gid = fd.u64().unwrap();
                let result_bl = fd.bufferlist().unwrap();
                let mut rd = Decoder::new(result_bl.clone());
                if CephXResponseHeader::decode(&mut rd).unwrap().request_type == CEPHX_GET_ROTATING_KEY {
                    let kind = client.handle_response(result, &result_bl, now).unwrap();
                    assert_eq!(kind, client::ResponseKind::RotatingKeys);
                    rotating = client.rotating_secrets().cloned();
                }
            }
        }
        sessions.push(MonAuthResult { client, global_id });
    }
    let rotating = rotating.expect("osd.0 fetched its rotating keys");
    assert!(!rotating.secrets.is_empty());
    eprintln!(
        "mon sessions verified: {} + {reconnects} reconnects ({signatures} AUTH_SIGNATUREs); osd rotating secrets: {:?}",
        sessions.len(),
        rotating.secrets.keys().collect::<Vec<_>>()
    );
    assert!(
        sessions
            .iter()
            .filter(|s| s.client.name().to_string() == "client.admin")
            .count()
            >= 4
    );

    // Client → OSD (port 6801): verify authorizers with our service side, follow the challenge, decrypt.
    let osd_keys = ServiceKeys {
        service_id: ENTITY_TYPE_OSD,
        rotating,
        own: None,
    };
    let mut found_plaintext = 0;
    let mut authorizers = 0;
    for c in conns.iter().filter(|c| c.server.port() == 6801) {
        let (cf, c_secure_at) = plain_part(c.to_server.bytes(), &[TAG_AUTH_REQUEST_MORE]);
        let (sf, s_secure_at) = plain_part(c.to_client.bytes(), &[TAG_AUTH_DONE]);
        let Some(req) = cf.iter().find(|f| f.tag == TAG_AUTH_REQUEST) else {
            continue;
        };
        let mut d = Decoder::new(req.segments[0].clone());
        assert_eq!(d.u32().unwrap(), 2);
        let _modes: Vec<u32> = Vec::decode(&mut d).unwrap();
        let first = d.bufferlist().unwrap();
        // Our service side opens the real ticket with osd.0's rotating secrets and challenges.
        let mut verifier = ServiceAuthorizerVerifier::new(p.clone());
        let step = verifier.verify(&osd_keys, &first, 64).unwrap();
        assert!(matches!(step, ServiceStep::Challenge(_)));
        // Find whose ticket it is: the session with that global id.
        let mut ad = Decoder::new(first.clone());
        let _v = ad.u8().unwrap();
        let gid = ad.u64().unwrap();
        let Some(sess) = sessions.iter().find(|s| s.global_id == gid) else {
            continue;
        };
        let ticket = &sess.client.tickets().tickets[&ENTITY_TYPE_OSD];
        let mut a = Authorizer::build(
            p.clone(),
            gid,
            ENTITY_TYPE_OSD,
            &ticket.ticket,
            ticket.session_key.clone(),
        )
        .unwrap();
        // The real authorizer's nonce (our Authorizer picks its own; use the real one to replay exactly).
        let _svc = ad.u32().unwrap();
        let _tb = CephXTicketBlob::decode(&mut ad).unwrap();
        let real: CephXAuthorize = decode_decrypt(&*p, &ticket.session_key, &mut ad).unwrap();
        let challenge = bl(
            sf.iter()
                .find(|f| f.tag == TAG_AUTH_REPLY_MORE)
                .expect("OSD challenges"),
            0,
        );
        let ch: CephXAuthorizeChallenge = decrypt_enc_bl(&*p, &ticket.session_key, &challenge).unwrap();
        let second = bl(cf.iter().find(|f| f.tag == TAG_AUTH_REQUEST_MORE).unwrap(), 0);
        let answered: CephXAuthorize = {
            let mut x = Decoder::new(second.clone());
            let _ = x.u8();
            let _ = x.u64();
            let _ = x.u32();
            let _ = CephXTicketBlob::decode(&mut x).unwrap();
            decode_decrypt(&*p, &ticket.session_key, &mut x).unwrap()
        };
        assert_eq!(
            answered,
            CephXAuthorize {
                nonce: real.nonce,
                have_challenge: true,
                server_challenge_plus_one: ch.server_challenge + 1
            }
        );
        // Our client side answers the same challenge the same way (same ticket, same +1).
        let ours = a.add_challenge(&challenge).unwrap();
        assert_eq!(
            &ours[..first.len() - 36],
            &second[..first.len() - 36],
            "same authorizer header and ticket"
        );
        let done = sf.iter().find(|f| f.tag == TAG_AUTH_DONE).expect("OSD AUTH_DONE");
        let mut dd = Decoder::new(done.segments[0].clone());
        let _gid = dd.u64().unwrap();
        assert_eq!(dd.u32().unwrap(), 2, "secure mode");
        let reply_payload = dd.bufferlist().unwrap();
        // Verify with the real nonce: rebuild an Authorizer whose nonce is the real one is not possible through the
        // public API (nonces are random), so check the reply's nonce + 1 directly and take the secret.
        let reply: CephXAuthorizeReply =
            decode_decrypt(&*p, &ticket.session_key, &mut Decoder::new(reply_payload.clone())).unwrap();
        assert_eq!(reply.nonce_plus_one, real.nonce + 1);
        assert!(
            matches!(
                a.verify_reply(&reply_payload),
                Err(CephxError::NonceMismatch { .. })
            ),
            "a different nonce must not verify"
        );
        let cs = reply.connection_secret;
        assert_eq!(cs.len(), 64);
        authorizers += 1;

        let c_frames = secure_frames(c.to_server.bytes(), c_secure_at, &cs, Role::Acceptor, 500);
        assert_eq!(c_frames.first().map(|f| f.tag), Some(TAG_AUTH_SIGNATURE));
        let sig = p.hmac_sha256(&ticket.session_key.secret, &c.to_client.bytes()[..s_secure_at]);
        assert_eq!(
            &c_frames[0].segments[0][..32],
            &sig[..],
            "client→OSD AUTH_SIGNATURE keyed by the ticket session key"
        );
        for f in c_frames.iter().filter(|f| f.tag == TAG_MESSAGE) {
            let msg_type = u16::from_le_bytes(f.segments[0][16..18].try_into().unwrap());
            if msg_type == 42
                && f.segments
                    .iter()
                    .any(|s| s.windows(12).any(|w| w == b"hello ferro\n"))
            {
                found_plaintext += 1;
            }
        }
    }
    eprintln!(
        "client→OSD authorizers verified: {authorizers}; MOSDOp frames with 'hello ferro\\n': {found_plaintext}"
    );
    assert!(authorizers >= 1);
    assert!(found_plaintext >= 1, "the known plaintext must decrypt");
}

/// crc-mode capture (1 mon, 1 mgr, 3 OSDs): every daemon's rotating keys decrypt with its own key, and with them
/// our service side opens every authorizer a peer OSD, the mgr or a client presented to an OSD or the mgr.
#[test]
fn crc_capture_daemon_rotating_keys_and_peer_authorizers() {
    let (Some(dir), Some(cap)) = (ceph_capture::capture_dir("crc"), ceph_capture::load("crc")) else {
        return;
    };
    let conns: Vec<&Connection> = cap.connections().iter().collect();
    let p: Arc<dyn CryptoProvider> = Arc::new(AwsLcProvider);
    let now = UTime::new(1_762_000_000, 0);
    let daemons = [
        ("osd.0", "keyring.osd.0"),
        ("osd.1", "keyring.osd.1"),
        ("osd.2", "keyring.osd.2"),
        ("mgr.x", "keyring.mgr.x"),
    ];
    let mut rotating: BTreeMap<u32, ServiceKeys> = BTreeMap::new();
    let mut replies = 0;
    for c in conns.iter().filter(|c| c.server.port() == 3700) {
        let cf = all_plain_frames(c.to_server.bytes());
        let Some(req) = cf.iter().find(|f| f.tag == TAG_AUTH_REQUEST) else {
            continue;
        };
        let mut d = Decoder::new(req.segments[0].clone());
        let _ = d.u32().unwrap();
        let _: Vec<u32> = Vec::decode(&mut d).unwrap();
        let mut pd = Decoder::new(d.bufferlist().unwrap());
        let _ = pd.u8().unwrap();
        let name = EntityName::decode(&mut pd).unwrap();
        let Some((_, file)) = daemons.iter().find(|(n, _)| *n == name.to_string()) else {
            continue;
        };
        let key = keyring_key(&dir.join(file), &name.to_string());
        for f in all_plain_frames(c.to_client.bytes())
            .iter()
            .filter(|f| f.tag == TAG_MESSAGE && !f.segments[1].is_empty())
        {
            if u16::from_le_bytes(f.segments[0][16..18].try_into().unwrap()) != 18 {
                continue;
            }
            let mut fd = Decoder::new(f.segments[1].clone());
            let _ = fd.u32().unwrap();
            let result = fd.i32().unwrap();
            let _ = fd.u64().unwrap();
            let bl = fd.bufferlist().unwrap();
            if CephXResponseHeader::decode(&mut Decoder::new(bl.clone()))
                .unwrap()
                .request_type
                != CEPHX_GET_ROTATING_KEY
            {
                continue;
            }
            let mut client = MonAuthClient::new(p.clone(), name.clone(), key.clone(), 0);
            client.handle_response(result, &bl, now).unwrap();
            let keys = rotating.entry(name.ty).or_insert_with(|| ServiceKeys {
                service_id: name.ty,
                ..Default::default()
            });
            for (id, k) in &client.rotating_secrets().unwrap().secrets {
                keys.rotating.secrets.insert(*id, k.clone());
            }
            replies += 1;
        }
    }
    assert!(
        rotating.contains_key(&ENTITY_TYPE_OSD) && rotating.contains_key(&ENTITY_TYPE_MGR),
        "{:?}",
        rotating.keys()
    );
    let mut peers: BTreeMap<String, usize> = BTreeMap::new();
    let mut authorizers = 0;
    for c in conns.iter().filter(|c| (6800..=7300).contains(&c.server.port())) {
        let cf = all_plain_frames(c.to_server.bytes());
        let Some(req) = cf.iter().find(|f| f.tag == TAG_AUTH_REQUEST) else {
            continue;
        };
        let mut d = Decoder::new(req.segments[0].clone());
        if d.u32().unwrap() != 2 {
            continue;
        }
        let _: Vec<u32> = Vec::decode(&mut d).unwrap();
        let payload = d.bufferlist().unwrap();
        let mut ad = Decoder::new(payload.clone());
        let _ = ad.u8().unwrap();
        let _ = ad.u64().unwrap();
        let service = ad.u32().unwrap();
        let ticket = CephXTicketBlob::decode(&mut ad).unwrap();
        let keys = &rotating[&service];
        let step = ServiceAuthorizerVerifier::new(p.clone())
            .verify(keys, &payload, 0)
            .unwrap();
        assert!(matches!(step, ServiceStep::Challenge(_)));
        let secret = keys.rotating.get(ticket.secret_id).unwrap().key.clone();
        let info: CephXServiceTicketInfo = decrypt_enc_bl(&*p, &secret, &ticket.blob).unwrap();
        *peers
            .entry(format!(
                "{}→{}",
                info.ticket.name,
                entity_type_name(service).unwrap()
            ))
            .or_default() += 1;
        authorizers += 1;
    }
    eprintln!("rotating-key replies: {replies}; authorizers opened: {authorizers}; {peers:?}");
    assert!(
        peers.keys().any(|k| k.starts_with("osd.") && k.ends_with("→osd")),
        "peer OSD authorizers"
    );
    assert!(
        peers.keys().any(|k| k.starts_with("client.admin→osd")),
        "client authorizers"
    );
    assert!(
        peers.keys().any(|k| k.starts_with("osd.") && k.ends_with("→mgr")),
        "OSD→mgr authorizers"
    );
}
