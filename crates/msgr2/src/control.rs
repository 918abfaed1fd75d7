// SPDX-License-Identifier: LGPL-3.0-or-later
//! The banner and the payloads of control frames (segment 0), with the encodings of `frames_v2.h`. Frames are
//! encoded with the features msgr2 assumes for frames (MSG_ADDR2 + SERVER_NAUTILUS), independent of the session's
//! negotiated features.

use bytes::Bytes;
use denc::{DecodeError, Decoder, Encoder};

use crate::addr::{AddrVec, EntityAddr};

/// `"ceph v2\n"`.
pub const BANNER_PREFIX: &[u8; 8] = b"ceph v2\n";
/// Prefix + le16 payload length.
pub const BANNER_HEAD_LEN: usize = 10;
/// Banner payload: le64 supported + le64 required.
pub const BANNER_PAYLOAD_LEN: usize = 16;
/// msgr2 feature bit: revision 1 (v2.1).
pub const MSGR2_FEATURE_REVISION_1: u64 = 1 << 0;
/// msgr2 feature bit: on-wire compression (Quincy and later; never offered by us).
pub const MSGR2_FEATURE_COMPRESSION: u64 = 1 << 1;

/// `CEPH_MSG_CONNECT_LOSSY` in CLIENT_IDENT / SERVER_IDENT flags.
pub const IDENT_FLAG_LOSSY: u64 = 1;

/// The banner both sides send first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Banner {
    pub supported: u64,
    pub required: u64,
}

impl Banner {
    pub fn encode(&self) -> Bytes {
        let mut e = Encoder::default();
        e.raw(BANNER_PREFIX);
        e.u16(BANNER_PAYLOAD_LEN as u16);
        e.u64(self.supported);
        e.u64(self.required);
        e.into_bytes()
    }
}

/// A decoded control-frame payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Hello {
        entity_type: u8,
        peer_addr: EntityAddr,
    },
    AuthRequest {
        method: u32,
        preferred_modes: Vec<u32>,
        payload: Bytes,
    },
    AuthBadMethod {
        method: u32,
        result: i32,
        allowed_methods: Vec<u32>,
        allowed_modes: Vec<u32>,
    },
    AuthReplyMore {
        payload: Bytes,
    },
    AuthRequestMore {
        payload: Bytes,
    },
    AuthDone {
        global_id: u64,
        con_mode: u32,
        payload: Bytes,
    },
    AuthSignature {
        sha256: [u8; 32],
    },
    ClientIdent(ClientIdent),
    ServerIdent(ServerIdent),
    IdentMissingFeatures {
        features: u64,
    },
    SessionReconnect(SessionReconnect),
    SessionReset {
        full: bool,
    },
    SessionRetry {
        connect_seq: u64,
    },
    SessionRetryGlobal {
        global_seq: u64,
    },
    SessionReconnectOk {
        msg_seq: u64,
    },
    Wait,
    Keepalive2 {
        stamp: UTime,
    },
    Keepalive2Ack {
        stamp: UTime,
    },
    Ack {
        seq: u64,
    },
}

/// `utime_t`: le32 seconds, le32 nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct UTime {
    pub sec: u32,
    pub nsec: u32,
}

impl UTime {
    pub fn from_nanos(ns: u64) -> Self {
        UTime {
            sec: (ns / 1_000_000_000) as u32,
            nsec: (ns % 1_000_000_000) as u32,
        }
    }
    pub fn as_nanos(&self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.nsec)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdent {
    pub addrs: AddrVec,
    pub target_addr: EntityAddr,
    pub gid: i64,
    pub global_seq: u64,
    pub supported_features: u64,
    pub required_features: u64,
    pub flags: u64,
    pub cookie: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdent {
    pub addrs: AddrVec,
    pub gid: i64,
    pub global_seq: u64,
    pub supported_features: u64,
    pub required_features: u64,
    pub flags: u64,
    pub cookie: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReconnect {
    pub addrs: AddrVec,
    pub client_cookie: u64,
    pub server_cookie: u64,
    pub global_seq: u64,
    pub connect_seq: u64,
    pub msg_seq: u64,
}

use crate::frame::Tag;

fn u32s(e: &mut Encoder, v: &[u32]) {
    e.length(v.len());
    for x in v {
        e.u32(*x);
    }
}

fn read_u32s(d: &mut Decoder) -> denc::Result<Vec<u32>> {
    let n = d.length("vector<u32>", 4)?;
    (0..n).map(|_| d.u32()).collect()
}

impl Control {
    pub fn tag(&self) -> Tag {
        match self {
            Control::Hello { .. } => Tag::Hello,
            Control::AuthRequest { .. } => Tag::AuthRequest,
            Control::AuthBadMethod { .. } => Tag::AuthBadMethod,
            Control::AuthReplyMore { .. } => Tag::AuthReplyMore,
            Control::AuthRequestMore { .. } => Tag::AuthRequestMore,
            Control::AuthDone { .. } => Tag::AuthDone,
            Control::AuthSignature { .. } => Tag::AuthSignature,
            Control::ClientIdent(_) => Tag::ClientIdent,
            Control::ServerIdent(_) => Tag::ServerIdent,
            Control::IdentMissingFeatures { .. } => Tag::IdentMissingFeatures,
            Control::SessionReconnect(_) => Tag::SessionReconnect,
            Control::SessionReset { .. } => Tag::SessionReset,
            Control::SessionRetry { .. } => Tag::SessionRetry,
            Control::SessionRetryGlobal { .. } => Tag::SessionRetryGlobal,
            Control::SessionReconnectOk { .. } => Tag::SessionReconnectOk,
            Control::Wait => Tag::Wait,
            Control::Keepalive2 { .. } => Tag::Keepalive2,
            Control::Keepalive2Ack { .. } => Tag::Keepalive2Ack,
            Control::Ack { .. } => Tag::Ack,
        }
    }

    /// The segment-0 payload.
    pub fn encode(&self) -> Bytes {
        let mut e = Encoder::default();
        match self {
            Control::Hello {
                entity_type,
                peer_addr,
            } => {
                e.u8(*entity_type);
                peer_addr.encode_to(&mut e);
            }
            Control::AuthRequest {
                method,
                preferred_modes,
                payload,
            } => {
                e.u32(*method);
                u32s(&mut e, preferred_modes);
                e.bytes(payload);
            }
            Control::AuthBadMethod {
                method,
                result,
                allowed_methods,
                allowed_modes,
            } => {
                e.u32(*method);
                e.i32(*result);
                u32s(&mut e, allowed_methods);
                u32s(&mut e, allowed_modes);
            }
            Control::AuthReplyMore { payload } | Control::AuthRequestMore { payload } => e.bytes(payload),
            Control::AuthDone {
                global_id,
                con_mode,
                payload,
            } => {
                e.u64(*global_id);
                e.u32(*con_mode);
                e.bytes(payload);
            }
            Control::AuthSignature { sha256 } => e.raw(sha256),
            Control::ClientIdent(c) => {
                c.addrs.encode_to(&mut e);
                c.target_addr.encode_to(&mut e);
                e.i64(c.gid);
                e.u64(c.global_seq);
                e.u64(c.supported_features);
                e.u64(c.required_features);
                e.u64(c.flags);
                e.u64(c.cookie);
            }
            Control::ServerIdent(s) => {
                s.addrs.encode_to(&mut e);
                e.i64(s.gid);
                e.u64(s.global_seq);
                e.u64(s.supported_features);
                e.u64(s.required_features);
                e.u64(s.flags);
                e.u64(s.cookie);
            }
            Control::IdentMissingFeatures { features } => e.u64(*features),
            Control::SessionReconnect(r) => {
                r.addrs.encode_to(&mut e);
                e.u64(r.client_cookie);
                e.u64(r.server_cookie);
                e.u64(r.global_seq);
                e.u64(r.connect_seq);
                e.u64(r.msg_seq);
            }
            Control::SessionReset { full } => e.bool(*full),
            Control::SessionRetry { connect_seq } => e.u64(*connect_seq),
            Control::SessionRetryGlobal { global_seq } => e.u64(*global_seq),
            Control::SessionReconnectOk { msg_seq } => e.u64(*msg_seq),
            Control::Wait => {}
            Control::Keepalive2 { stamp } | Control::Keepalive2Ack { stamp } => {
                e.u32(stamp.sec);
                e.u32(stamp.nsec);
            }
            Control::Ack { seq } => e.u64(*seq),
        }
        e.into_bytes()
    }

    /// Decode the payload of a control frame with tag `tag`. Trailing bytes are tolerated (newer peers may
    /// append fields), as Ceph's decoders do.
    pub fn decode(tag: Tag, payload: Bytes) -> denc::Result<Control> {
        let mut d = Decoder::new(payload);
        let d = &mut d;
        Ok(match tag {
            Tag::Hello => Control::Hello {
                entity_type: d.u8()?,
                peer_addr: EntityAddr::decode_from(d)?,
            },
            Tag::AuthRequest => Control::AuthRequest {
                method: d.u32()?,
                preferred_modes: read_u32s(d)?,
                payload: d.bufferlist()?,
            },
            Tag::AuthBadMethod => Control::AuthBadMethod {
                method: d.u32()?,
                result: d.i32()?,
                allowed_methods: read_u32s(d)?,
                allowed_modes: read_u32s(d)?,
            },
            Tag::AuthReplyMore => Control::AuthReplyMore {
                payload: d.bufferlist()?,
            },
            Tag::AuthRequestMore => Control::AuthRequestMore {
                payload: d.bufferlist()?,
            },
            Tag::AuthDone => Control::AuthDone {
                global_id: d.u64()?,
                con_mode: d.u32()?,
                payload: d.bufferlist()?,
            },
            Tag::AuthSignature => Control::AuthSignature {
                sha256: d.take_array()?,
            },
            Tag::ClientIdent => Control::ClientIdent(ClientIdent {
                addrs: AddrVec::decode_from(d)?,
                target_addr: EntityAddr::decode_from(d)?,
                gid: d.i64()?,
                global_seq: d.u64()?,
                supported_features: d.u64()?,
                required_features: d.u64()?,
                flags: d.u64()?,
                cookie: d.u64()?,
            }),
            Tag::ServerIdent => Control::ServerIdent(ServerIdent {
                addrs: AddrVec::decode_from(d)?,
                gid: d.i64()?,
                global_seq: d.u64()?,
                supported_features: d.u64()?,
                required_features: d.u64()?,
                flags: d.u64()?,
                cookie: d.u64()?,
            }),
            Tag::IdentMissingFeatures => Control::IdentMissingFeatures { features: d.u64()? },
            Tag::SessionReconnect => Control::SessionReconnect(SessionReconnect {
                addrs: AddrVec::decode_from(d)?,
                client_cookie: d.u64()?,
                server_cookie: d.u64()?,
                global_seq: d.u64()?,
                connect_seq: d.u64()?,
                msg_seq: d.u64()?,
            }),
            Tag::SessionReset => Control::SessionReset { full: d.bool()? },
            Tag::SessionRetry => Control::SessionRetry {
                connect_seq: d.u64()?,
            },
            Tag::SessionRetryGlobal => Control::SessionRetryGlobal { global_seq: d.u64()? },
            Tag::SessionReconnectOk => Control::SessionReconnectOk { msg_seq: d.u64()? },
            Tag::Wait => Control::Wait,
            Tag::Keepalive2 => Control::Keepalive2 {
                stamp: UTime {
                    sec: d.u32()?,
                    nsec: d.u32()?,
                },
            },
            Tag::Keepalive2Ack => Control::Keepalive2Ack {
                stamp: UTime {
                    sec: d.u32()?,
                    nsec: d.u32()?,
                },
            },
            Tag::Ack => Control::Ack { seq: d.u64()? },
            Tag::Message => {
                return Err(DecodeError::invalid(
                    "control frame",
                    "MESSAGE is not a control frame",
                ));
            }
        })
    }
}
