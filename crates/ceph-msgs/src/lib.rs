// SPDX-License-Identifier: LGPL-3.0-or-later
//! Ceph message payloads spoken by mon and mgr clients, with Pacific (16.2.15) header versions.
//!
//! A message on the wire is a header (type, version, compat version, priority, tid) plus three byte segments:
//! front (the encoded payload), middle (unused here) and data (bulk bytes, e.g. a mon command's input/output).
//! [`Message`] is that raw form; it is what the messenger moves. Each typed message implements [`CephMessage`],
//! which turns it into a [`Message`] for a peer's features and back.
//!
//! Decoding is hostile-input safe: every read is bounds-checked by `denc`, containers are bounded by the input
//! size, and a message whose compat version is newer than what we understand is refused, as Ceph's
//! `decode_message` does. Trailing bytes after the fields we know are ignored (newer senders append fields).
//!
//! Type numbers and versions: `src/include/ceph_fs.h` (CEPH_MSG_*), `src/msg/Message.h` (MSG_*) and
//! `src/messages/M*.h`; the versions were checked against real Pacific traffic (testdata/mon-messages.bin).

/// A message decoded at exactly its Pacific header version (or newer) refuses older ones with this error.
pub(crate) fn too_old(type_name: &'static str, version: u16, oldest: u16) -> DecodeError {
    DecodeError::TooOld {
        type_name,
        version: version.min(255) as u8,
        oldest: oldest.min(255) as u8,
    }
}

/// Implements [`CephMessage`] for a type with inherent `enc(&self, &mut Encoder)`,
/// `dec(&mut Decoder, &Bytes) -> Result<Self, DecodeError>` and `data_segment(&self) -> Bytes` (see `no_data!`).
/// Header versions older than HEAD are refused (`OLDEST`).
macro_rules! message {
    ($t:ty, $ty:expr, $head:expr, $compat:expr, $name:expr, $prio:expr) => {
        message!($t, $ty, $head, $compat, $name, $prio, |_m: &$t| 256);
    };
    ($t:ty, $ty:expr, $head:expr, $compat:expr, $name:expr, $prio:expr, $front_capacity:expr) => {
        impl $t {
            /// The oldest header version our decoder reads.
            pub const OLDEST: u16 = $head;
        }
        impl $crate::CephMessage for $t {
            const TYPE: u16 = $ty;
            const HEAD_VERSION: u16 = $head;
            const COMPAT_VERSION: u16 = $compat;
            const NAME: &'static str = $name;
            const PRIORITY: u16 = $prio;
            fn front_capacity(&self) -> usize {
                ($front_capacity)(self)
            }
            fn encode_front(&self, e: &mut ::denc::Encoder) {
                self.enc(e)
            }
            fn data(&self) -> ::bytes::Bytes {
                self.data_segment()
            }
            fn decode_front(
                version: u16,
                d: &mut ::denc::Decoder,
                data: &::bytes::Bytes,
            ) -> Result<Self, ::denc::DecodeError> {
                if version < Self::OLDEST {
                    return Err($crate::too_old($name, version, Self::OLDEST));
                }
                Self::dec(d, data)
            }
        }
    };
}

/// An empty data segment for each listed message type (for `message!`).
macro_rules! no_data {
    ($($t:ty),*) => {$(
        impl $t {
            fn data_segment(&self) -> ::bytes::Bytes {
                ::bytes::Bytes::new()
            }
        }
    )*};
}

pub mod log;
mod mgr;
mod mon;
pub mod osd;
pub mod osd_ec;
pub mod osd_op;
pub mod osd_rep;
pub mod osd_scrub;
mod osdmap;

use bytes::Bytes;
use denc::{DecodeError, Decoder, Encoder};

pub use mgr::MMgrMap;
pub use mon::{
    MAuth, MAuthReply, MConfig, MMonCommand, MMonCommandAck, MMonGetMap, MMonGetVersion, MMonGetVersionReply,
    MMonMap, MMonSubscribe, MMonSubscribeAck, PaxosHeader, SUBSCRIBE_ONETIME, SubscribeItem,
};
pub use osdmap::MOSDMap;

/// Message type numbers (`CEPH_MSG_*` in ceph_fs.h, `MSG_*` in Message.h).
pub mod msg_type {
    pub const MON_MAP: u16 = 4;
    pub const MON_GET_MAP: u16 = 5;
    pub const MON_SUBSCRIBE: u16 = 15;
    pub const MON_SUBSCRIBE_ACK: u16 = 16;
    pub const AUTH: u16 = 17;
    pub const AUTH_REPLY: u16 = 18;
    pub const MON_GET_VERSION: u16 = 19;
    pub const MON_GET_VERSION_REPLY: u16 = 20;
    pub const OSD_MAP: u16 = 41;
    pub const MON_COMMAND: u16 = 50;
    pub const MON_COMMAND_ACK: u16 = 51;
    pub const LOG: u16 = 52;
    pub const LOG_ACK: u16 = 53;
    pub const CONFIG: u16 = 62;
    pub const GET_CONFIG: u16 = 63;
    pub const MGR_MAP: u16 = 0x704;
    pub const MGR_COMMAND: u16 = 0x709;
    pub const MGR_COMMAND_REPLY: u16 = 0x70a;
}

/// Message priorities (`CEPH_MSG_PRIO_*`).
pub mod prio {
    pub const LOW: u16 = 64;
    pub const DEFAULT: u16 = 127;
    pub const HIGH: u16 = 196;
    pub const HIGHEST: u16 = 255;
}

/// A message as the messenger carries it: the header fields that belong to the message (the messenger owns seq
/// and ack_seq) and its three segments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    pub msg_type: u16,
    pub version: u16,
    pub compat_version: u16,
    pub priority: u16,
    /// Transaction id; mon commands and version queries are matched to their replies by it.
    pub tid: u64,
    pub front: Bytes,
    pub middle: Bytes,
    pub data: Bytes,
    /// More of the data segment after `data`, by reference (a sender's rope, e.g. MOSDRepOp's transaction with
    /// the client's payload in it): the data segment is `data` followed by these pieces. Decoders see it whole
    /// ([`Message::data_flat`]); received messages have it all in `data`.
    pub data_tail: Vec<Bytes>,
    /// `ceph_msg_header2::data_off`: where in its page the data segment should start on the receiver (msgr2
    /// receives large data segments at this page offset), so a payload inside the segment lands page-aligned.
    pub data_off: u16,
}

impl Message {
    pub fn with_tid(mut self, tid: u64) -> Self {
        self.tid = tid;
        self
    }

    /// Length of the data segment (`data` and `data_tail`).
    pub fn data_len(&self) -> usize {
        self.data.len() + self.data_tail.iter().map(Bytes::len).sum::<usize>()
    }

    /// The data segment in one buffer: `data` itself, or a copy of the rope when there is a tail.
    pub fn data_flat(&self) -> Bytes {
        if self.data_tail.is_empty() {
            return self.data.clone();
        }
        let mut b = bytes::BytesMut::with_capacity(self.data_len());
        b.extend_from_slice(&self.data);
        for p in &self.data_tail {
            b.extend_from_slice(p);
        }
        b.freeze()
    }
}

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    #[error("expected message type {expected}, got {got}")]
    WrongType { expected: u16, got: u16 },
    #[error("{name}: compat version {compat} is newer than the version {supported} we understand")]
    Incompatible {
        name: &'static str,
        compat: u16,
        supported: u16,
    },
    #[error("{name}: {source}")]
    Decode {
        name: &'static str,
        #[source]
        source: DecodeError,
    },
}

/// A typed Ceph message.
pub trait CephMessage: Sized {
    /// The wire type number.
    const TYPE: u16;
    /// The version this implementation encodes (Pacific's HEAD_VERSION).
    const HEAD_VERSION: u16;
    /// The oldest version a receiver must understand to decode what we encode (COMPAT_VERSION).
    const COMPAT_VERSION: u16;
    /// Ceph's name for the message type (`get_type_name`).
    const NAME: &'static str;
    /// The priority Ceph sends it with.
    const PRIORITY: u16 = prio::DEFAULT;

    /// Encode the front segment for a peer with the features in `e`.
    fn encode_front(&self, e: &mut Encoder);

    /// The data segment (bulk bytes). Empty for most messages.
    fn data(&self) -> Bytes {
        Bytes::new()
    }

    /// Decode from the front segment of a message with header version `version`, and its data segment.
    fn decode_front(version: u16, front: &mut Decoder, data: &Bytes) -> Result<Self, DecodeError>;

    /// Bytes to reserve for the front segment: enough for most messages of the type, so encoding it is one
    /// allocation instead of a buffer that grows 8, 16, 32… bytes at a time.
    fn front_capacity(&self) -> usize {
        256
    }

    /// The full message for a peer with `features` (tid 0; set it with [`Message::with_tid`]).
    fn to_message(&self, features: u64) -> Message {
        let mut e = Encoder::with_capacity(features, self.front_capacity());
        self.encode_front(&mut e);
        Message {
            msg_type: Self::TYPE,
            version: Self::HEAD_VERSION,
            compat_version: Self::COMPAT_VERSION,
            priority: Self::PRIORITY,
            tid: 0,
            front: e.into_bytes(),
            middle: Bytes::new(),
            data: self.data(),
            data_tail: Vec::new(),
            data_off: 0,
        }
    }

    /// Decode a received message, checking its type and compat version.
    fn from_message(m: &Message) -> Result<Self, MsgError> {
        if m.msg_type != Self::TYPE {
            return Err(MsgError::WrongType {
                expected: Self::TYPE,
                got: m.msg_type,
            });
        }
        if m.compat_version > Self::HEAD_VERSION {
            return Err(MsgError::Incompatible {
                name: Self::NAME,
                compat: m.compat_version,
                supported: Self::HEAD_VERSION,
            });
        }
        let mut d = Decoder::new(m.front.clone());
        // a rope is flattened only for a message decoded without crossing the wire (tests, the simulator)
        let data = m.data_flat();
        Self::decode_front(m.version, &mut d, &data).map_err(|source| MsgError::Decode {
            name: Self::NAME,
            source,
        })
    }
}

/// The messages a mon client receives, decoded; anything else stays raw.
#[derive(Debug, Clone, PartialEq)]
pub enum MonIncoming {
    MonMap(MMonMap),
    OsdMap(MOSDMap),
    Config(MConfig),
    MgrMap(MMgrMap),
    SubscribeAck(MMonSubscribeAck),
    GetVersionReply { tid: u64, reply: MMonGetVersionReply },
    CommandAck { tid: u64, ack: MMonCommandAck },
    AuthReply(MAuthReply),
    Other(Message),
}

impl MonIncoming {
    pub fn decode(m: &Message) -> Result<Self, MsgError> {
        Ok(match m.msg_type {
            msg_type::MON_MAP => MonIncoming::MonMap(MMonMap::from_message(m)?),
            msg_type::OSD_MAP => MonIncoming::OsdMap(MOSDMap::from_message(m)?),
            msg_type::CONFIG => MonIncoming::Config(MConfig::from_message(m)?),
            msg_type::MGR_MAP => MonIncoming::MgrMap(MMgrMap::from_message(m)?),
            msg_type::MON_SUBSCRIBE_ACK => MonIncoming::SubscribeAck(MMonSubscribeAck::from_message(m)?),
            msg_type::MON_GET_VERSION_REPLY => MonIncoming::GetVersionReply {
                tid: m.tid,
                reply: MMonGetVersionReply::from_message(m)?,
            },
            msg_type::MON_COMMAND_ACK => MonIncoming::CommandAck {
                tid: m.tid,
                ack: MMonCommandAck::from_message(m)?,
            },
            msg_type::AUTH_REPLY => MonIncoming::AuthReply(MAuthReply::from_message(m)?),
            _ => MonIncoming::Other(m.clone()),
        })
    }
}

/// Ceph's textual uuid form (`8-4-4-4-12` lowercase hex) of a raw uuid_d.
pub fn uuid_to_string(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Parse a textual uuid (hyphens optional), as in ceph.conf's `fsid`.
pub fn uuid_from_str(s: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = s.bytes().filter(|&c| c != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let pair = std::str::from_utf8(hex.get(2 * i..2 * i + 2)?).ok()?;
        *o = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_round_trip() {
        let s = "d298bafc-f546-4b02-8ab9-022c21a1a86c";
        let u = uuid_from_str(s).unwrap();
        assert_eq!(u[0], 0xd2);
        assert_eq!(uuid_to_string(&u), s);
        assert_eq!(uuid_from_str("zz"), None);
        assert_eq!(uuid_from_str("d298bafc-f546-4b02-8ab9-022c21a1a86g"), None);
    }

    #[test]
    fn newer_compat_is_refused_and_wrong_type_detected() {
        let mut m = MMonGetMap.to_message(u64::MAX);
        m.compat_version = 9;
        assert!(matches!(
            MMonGetMap::from_message(&m),
            Err(MsgError::Incompatible { .. })
        ));
        m.msg_type = 99;
        assert!(matches!(
            MMonGetMap::from_message(&m),
            Err(MsgError::WrongType { .. })
        ));
    }
}
