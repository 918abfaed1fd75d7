// SPDX-License-Identifier: LGPL-3.0-or-later
//! Secure mode against real Ceph bytes: every client.admin / osd.0 / mgr.x session with the monitor in the
//! secure-mode capture (../shared/captures/secure) is read with `msgr2::replay::parse_stream`, given the connection
//! secret that cephx derives from the cluster's keyrings. Every AES-GCM frame in both directions must decrypt and
//! parse (preamble crcs, 96-byte heads, second and tail blocks, nonce counters), the first secure frame each way
//! must be an AUTH_SIGNATURE equal to HMAC-SHA256(session key, the pre-auth bytes the other side sent) as computed
//! from `pre_auth_len`, and every MESSAGE must re-encode into a frame that decrypts to the same segments.
#![allow(clippy::unwrap_used)] // test code: a panic is the failure report

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use cephx::client::MonAuthClient;
use denc::{Decode, Decoder};
use msgr2::control::Control;
use msgr2::crypto::default_provider;
use msgr2::frame::{Role, Tag};
use msgr2::message::Message;
use msgr2::replay::parse_stream;

fn keyring_key(dir: &std::path::Path, name: &str, file: &str) -> cephx::CryptoKey {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let keyring = ceph_config::Keyring::parse(&text, &path.display().to_string()).unwrap();
    cephx::CryptoKey::from_base64(keyring.key_of(name).unwrap()).unwrap()
}

fn control(f: &msgr2::frame::Frame) -> Control {
    Control::decode(f.tag().unwrap(), f.segments[0].clone()).unwrap()
}

#[test]
fn secure_mon_sessions_decrypt_and_signatures_verify() {
    let (Some(dir), Some(cap)) = (ceph_capture::capture_dir("secure"), ceph_capture::load("secure")) else {
        return;
    };
    let keys: BTreeMap<String, cephx::CryptoKey> = [
        ("client.admin", "keyring.admin-and-mon"),
        ("osd.0", "keyring.osd.0"),
        ("mgr.x", "keyring.mgr.x"),
    ]
    .into_iter()
    .map(|(n, f)| (n.to_string(), keyring_key(&dir, n, f)))
    .collect();
    let cephx_provider: Arc<dyn cephx::CryptoProvider> = Arc::new(cephx::AwsLcProvider);
    let ours = default_provider();
    let now = cephx::UTime::new(1_762_000_000, 0);
    let mut previous: Vec<MonAuthClient> = Vec::new();
    let (mut sessions, mut secure_frames, mut messages) = (0, 0, 0);
    for c in cap.to_port(3800) {
        let (up, down) = (c.to_server.bytes(), c.to_client.bytes());
        // The clear part: who authenticates, the challenge, AUTH_DONE.
        let c_plain = parse_stream(up, Role::Connector, None).unwrap();
        let s_plain = parse_stream(down, Role::Acceptor, None).unwrap();
        let Some(Control::AuthRequest {
            method: 2, payload, ..
        }) = c_plain
            .frames
            .iter()
            .map(control)
            .find(|c| matches!(c, Control::AuthRequest { .. }))
        else {
            continue;
        };
        let mut pd = Decoder::new(payload.clone());
        assert_eq!(pd.u8().unwrap(), 10, "AUTH_MODE_MON");
        let name = cephx::EntityName::decode(&mut pd).unwrap();
        let claimed_gid = pd.u64().unwrap();
        let Some(secret) = keys.get(&name.to_string()) else {
            continue;
        };
        let controls: Vec<Control> = s_plain.frames.iter().map(control).collect();
        let challenge = controls.iter().find_map(|c| match c {
            Control::AuthReplyMore { payload } => Some(payload.clone()),
            _ => None,
        });
        let Some((global_id, con_mode, done)) = controls.iter().find_map(|c| match c {
            Control::AuthDone {
                global_id,
                con_mode,
                payload,
            } => Some((*global_id, *con_mode, payload.clone())),
            _ => None,
        }) else {
            continue;
        };
        assert_eq!(con_mode, 2, "{name}: secure mode");
        // A reconnect (global id claimed) continues that entity's previous cephx session.
        let mut client = match previous
            .iter()
            .rposition(|c| claimed_gid != 0 && c.name() == &name)
        {
            Some(i) => previous.remove(i),
            None => MonAuthClient::new(
                cephx_provider.clone(),
                name.clone(),
                secret.clone(),
                u32::from(
                    msgr2::types::ENTITY_TYPE_MON
                        | msgr2::types::ENTITY_TYPE_OSD
                        | msgr2::types::ENTITY_TYPE_MGR,
                ),
            ),
        };
        assert_eq!(client.initial_request(), payload);
        client.handle_reply_more(&challenge.unwrap()).unwrap();
        let session = client.handle_done(global_id, &done, now).unwrap();
        previous.push(client);
        let cs: &[u8] = &session.connection_secret;

        // The whole connection, decrypted by msgr2's own reader.
        let c = parse_stream(up, Role::Connector, Some((ours.as_ref(), cs))).unwrap();
        let s = parse_stream(down, Role::Acceptor, Some((ours.as_ref(), cs))).unwrap();
        assert_eq!(
            (c.pre_auth_len, s.pre_auth_len),
            (c_plain.pre_auth_len, s_plain.pre_auth_len)
        );
        let (ck, sk) = (c.switched_at.unwrap(), s.switched_at.unwrap());
        assert_eq!(
            c.frames[ck].tag(),
            Some(Tag::AuthSignature),
            "{name}: the connector's first secure frame"
        );
        assert_eq!(
            s.frames[sk].tag(),
            Some(Tag::AuthSignature),
            "{name}: the acceptor's first secure frame"
        );
        let key = &session.session_key.secret;
        assert_eq!(
            c.frames[ck].segments[0][..],
            ours.hmac_sha256(key, &[&down[..s.pre_auth_len]])[..]
        );
        assert_eq!(
            s.frames[sk].segments[0][..],
            ours.hmac_sha256(key, &[&up[..c.pre_auth_len]])[..]
        );
        assert!(c.trailing < 96 && s.trailing < 96, "{name}: undecryptable tail");
        // Every secure frame decoded; messages parse and re-encode (with a fresh key pair) to the same segments.
        for f in c.frames[ck..].iter().chain(s.frames[sk..].iter()) {
            secure_frames += 1;
            if f.tag() == Some(Tag::Message) {
                messages += 1;
                let m = Message::from_segments(&f.segments).unwrap();
                let p = default_provider();
                let mut tx = msgr2::frame::SecureTx::new(p.as_ref(), cs, Role::Connector).unwrap();
                let rx = msgr2::frame::SecureRx::new(p.as_ref(), cs, Role::Acceptor).unwrap();
                let n = f.preamble.num_segments as usize;
                let wire = msgr2::frame::encode_frame(
                    Some(&mut tx),
                    Tag::Message,
                    &m.segments()[..n],
                    &msgr2::message::MESSAGE_ALIGNS[..n],
                )
                .unwrap();
                let mut dec = msgr2::frame::FrameDecoder::new(msgr2::frame::FrameLimits::default());
                dec.set_secure(Some(rx));
                dec.push(&msgr2::frame::concat(&wire));
                let back = dec.next_frame().unwrap().unwrap();
                assert_eq!(back.segments, f.segments);
            } else {
                let _ = control(f);
            }
        }
        sessions += 1;
        let _ = Bytes::new();
    }
    eprintln!("{sessions} secure mon sessions, {secure_frames} secure frames decrypted, {messages} messages");
    assert!(sessions >= 3, "{sessions}");
    assert!(messages > 20, "{messages}");
}
