// SPDX-License-Identifier: LGPL-3.0-or-later
//! cephx wire structs (`src/auth/Auth.h`, `src/auth/cephx/CephxProtocol.h`). They use the old style: a bare
//! `u8 struct_v` and then fields, no ENCODE_START envelope, so a decoder cannot skip unknown trailing fields;
//! fields are read by version as Ceph does.

use std::collections::BTreeMap;

use bytes::Bytes;
use denc::{Decode, DecodeError, Decoder, Encode, Encoder};

use crate::crypto::CryptoKey;

/// `CEPH_ENTITY_TYPE_*` from denc, widened to u32: cephx carries them as service ids (le32 on the wire).
pub const ENTITY_TYPE_MON: u32 = denc::ENTITY_TYPE_MON as u32;
pub const ENTITY_TYPE_MDS: u32 = denc::ENTITY_TYPE_MDS as u32;
pub const ENTITY_TYPE_OSD: u32 = denc::ENTITY_TYPE_OSD as u32;
pub const ENTITY_TYPE_CLIENT: u32 = denc::ENTITY_TYPE_CLIENT as u32;
pub const ENTITY_TYPE_MGR: u32 = denc::ENTITY_TYPE_MGR as u32;
pub const ENTITY_TYPE_AUTH: u32 = denc::ENTITY_TYPE_AUTH as u32;

/// Request types of CephXRequestHeader / CephXResponseHeader.
pub const CEPHX_GET_AUTH_SESSION_KEY: u16 = 0x0100;
pub const CEPHX_GET_PRINCIPAL_SESSION_KEY: u16 = 0x0200;
pub const CEPHX_GET_ROTATING_KEY: u16 = 0x0400;

/// `AUTH_MODE_*` (`src/auth/Auth.h`): the first byte of an msgr2 AUTH_REQUEST payload.
pub const AUTH_MODE_AUTHORIZER: u8 = 1;
pub const AUTH_MODE_MON: u8 = 10;

/// `CEPH_AUTH_UID_DEFAULT`: the retired auid field is always encoded as -1.
pub const AUTH_UID_DEFAULT: u64 = u64::MAX;

/// `utime_t` and the auth `EntityName` are the shared `denc` types.
pub use denc::{EntityName, Utime as UTime};

/// `utime_t` from nanoseconds since the epoch (saturating at u32 seconds).
pub fn utime_from_nanos(n: u64) -> UTime {
    UTime::new(
        (n / 1_000_000_000).min(u64::from(u32::MAX)) as u32,
        (n % 1_000_000_000) as u32,
    )
}

/// `a + b`, saturating.
pub fn utime_add(a: UTime, b: UTime) -> UTime {
    utime_from_nanos(a.as_nanos().saturating_add(b.as_nanos()))
}

/// Type names as Ceph prints them (`ceph_entity_type_name`); `None` for unknown types.
pub fn entity_type_name(t: u32) -> Option<&'static str> {
    Some(match denc::entity_type_name(t) {
        "unknown" => return None,
        n => n,
    })
}

/// Parse `type.id` (`client.admin`, `osd.0`, `mon.`).
pub fn parse_entity_name(s: &str) -> Option<EntityName> {
    s.parse().ok()
}

/// An `EntityName` from a u32 service/entity type.
pub fn entity_name(ty: u32, id: impl Into<String>) -> EntityName {
    EntityName { ty, id: id.into() }
}

/// Decodes `struct_v` and refuses 0 (never produced by any Ceph version; a zero first byte means garbage).
fn version(d: &mut Decoder, what: &'static str) -> denc::Result<u8> {
    let v = d.u8()?;
    if v == 0 {
        return Err(DecodeError::invalid(what, "struct_v 0"));
    }
    Ok(v)
}

macro_rules! wire_struct {
    ($(#[$m:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? } version $v:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name { $(pub $field: $ty),* }
        impl Decode for $name {
            fn decode(d: &mut Decoder) -> denc::Result<Self> {
                version(d, stringify!($name))?;
                Ok($name { $($field: d.decode()?),* })
            }
        }
        impl Encode for $name {
            fn encode(&self, e: &mut Encoder) {
                e.u8($v);
                $(self.$field.encode(e);)*
            }
        }
    };
}

wire_struct!(
    /// The monitor's first answer to an AUTH_REQUEST.
    CephXServerChallenge { server_challenge: u64 } version 1
);
wire_struct!(
    /// The body of a CEPHX_GET_PRINCIPAL_SESSION_KEY request: the services wanted (`ENTITY_TYPE_*` bits).
    CephXServiceTicketRequest { keys: u32 } version 1
);
wire_struct!(
    /// `{session key, validity}` encrypted for the principal (the "A" part of a ticket reply).
    CephXServiceTicket { session_key: CryptoKey, validity: UTime } version 1
);
wire_struct!(
    /// The plaintext of a ticket blob, encrypted with the service's (rotating) secret (the "B" part).
    CephXServiceTicketInfo { ticket: AuthTicket, session_key: CryptoKey } version 1
);
wire_struct!(
    /// The service's CEPHX_V2 authorizer challenge.
    CephXAuthorizeChallenge { server_challenge: u64 } version 1
);
wire_struct!(
    /// A key that expires (one rotating service secret).
    ExpiringCryptoKey { key: CryptoKey, expiration: UTime } version 1
);
wire_struct!(
    /// The rotating secrets of one service type: previous, current, next, keyed by secret id.
    RotatingSecrets { secrets: BTreeMap<u64, ExpiringCryptoKey>, max_ver: u64 } version 1
);

/// Starts every request after the first round: which of the three requests follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CephXRequestHeader {
    pub request_type: u16,
}
impl Decode for CephXRequestHeader {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        Ok(CephXRequestHeader {
            request_type: d.u16()?,
        })
    }
}
impl Encode for CephXRequestHeader {
    fn encode(&self, e: &mut Encoder) {
        e.u16(self.request_type);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CephXResponseHeader {
    pub request_type: u16,
    /// 0 or a negative errno.
    pub status: i32,
}
impl Decode for CephXResponseHeader {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        Ok(CephXResponseHeader {
            request_type: d.u16()?,
            status: d.i32()?,
        })
    }
}
impl Encode for CephXResponseHeader {
    fn encode(&self, e: &mut Encoder) {
        e.u16(self.request_type);
        e.i32(self.status);
    }
}

/// An opaque ticket as the principal holds it: the secret id of the service key that encrypts `blob`
/// (`u64::MAX`: the entity's own key, used for the AUTH ticket) and the ciphertext of a CephXServiceTicketInfo.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CephXTicketBlob {
    pub secret_id: u64,
    pub blob: Bytes,
}
impl Decode for CephXTicketBlob {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        version(d, "CephXTicketBlob")?;
        Ok(CephXTicketBlob {
            secret_id: d.u64()?,
            blob: d.bufferlist()?,
        })
    }
}
impl Encode for CephXTicketBlob {
    fn encode(&self, e: &mut Encoder) {
        e.u8(1);
        e.u64(self.secret_id);
        e.bytes(&self.blob);
    }
}

/// The client's proof of its key. v3 (16.2.1+) promises that `old_ticket` is always presented when reconnecting
/// (global_id reclaim, CVE-2021-20288); v2 and v3 have the same layout. `struct_v` is kept so that decoded
/// samples re-encode as they were; we send 3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CephXAuthenticate {
    pub struct_v: u8,
    pub client_challenge: u64,
    pub key: u64,
    pub old_ticket: CephXTicketBlob,
    /// Services whose tickets the mon should add to its reply (Nautilus+).
    pub other_keys: u32,
}
impl Default for CephXAuthenticate {
    fn default() -> Self {
        CephXAuthenticate {
            struct_v: 3,
            client_challenge: 0,
            key: 0,
            old_ticket: CephXTicketBlob::default(),
            other_keys: 0,
        }
    }
}
impl Decode for CephXAuthenticate {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        let struct_v = version(d, "CephXAuthenticate")?;
        let client_challenge = d.u64()?;
        let key = d.u64()?;
        let old_ticket = d.decode()?;
        let other_keys = if struct_v >= 2 { d.u32()? } else { 0 };
        Ok(CephXAuthenticate {
            struct_v,
            client_challenge,
            key,
            old_ticket,
            other_keys,
        })
    }
}
impl Encode for CephXAuthenticate {
    fn encode(&self, e: &mut Encoder) {
        e.u8(self.struct_v);
        e.u64(self.client_challenge);
        e.u64(self.key);
        self.old_ticket.encode(e);
        if self.struct_v >= 2 {
            e.u32(self.other_keys);
        }
    }
}

/// The plaintext whose encryption proves knowledge of the entity key (no version byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CephXChallengeBlob {
    pub server_challenge: u64,
    pub client_challenge: u64,
}
impl Decode for CephXChallengeBlob {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        Ok(CephXChallengeBlob {
            server_challenge: d.u64()?,
            client_challenge: d.u64()?,
        })
    }
}
impl Encode for CephXChallengeBlob {
    fn encode(&self, e: &mut Encoder) {
        e.u64(self.server_challenge);
        e.u64(self.client_challenge);
    }
}

/// The encrypted part of an authorizer. v2 (CEPHX_V2) adds the answer to the service's challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CephXAuthorize {
    pub nonce: u64,
    pub have_challenge: bool,
    pub server_challenge_plus_one: u64,
}
impl Decode for CephXAuthorize {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        let v = version(d, "CephXAuthorize")?;
        let nonce = d.u64()?;
        let (have_challenge, server_challenge_plus_one) =
            if v >= 2 { (d.bool()?, d.u64()?) } else { (false, 0) };
        Ok(CephXAuthorize {
            nonce,
            have_challenge,
            server_challenge_plus_one,
        })
    }
}
impl Encode for CephXAuthorize {
    fn encode(&self, e: &mut Encoder) {
        e.u8(2);
        e.u64(self.nonce);
        e.bool(self.have_challenge);
        e.u64(self.server_challenge_plus_one);
    }
}

/// The service's answer to a valid authorizer: nonce + 1 and, in msgr2 secure mode, the connection secret
/// (v2 is used exactly when the secret is non-empty, as Ceph does).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CephXAuthorizeReply {
    pub nonce_plus_one: u64,
    pub connection_secret: Bytes,
}
impl Decode for CephXAuthorizeReply {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        let v = version(d, "CephXAuthorizeReply")?;
        let nonce_plus_one = d.u64()?;
        let connection_secret = if v >= 2 { d.bufferlist()? } else { Bytes::new() };
        Ok(CephXAuthorizeReply {
            nonce_plus_one,
            connection_secret,
        })
    }
}
impl Encode for CephXAuthorizeReply {
    fn encode(&self, e: &mut Encoder) {
        if self.connection_secret.is_empty() {
            e.u8(1);
            e.u64(self.nonce_plus_one);
        } else {
            e.u8(2);
            e.u64(self.nonce_plus_one);
            e.bytes(&self.connection_secret);
        }
    }
}

/// What a ticket allows: everything, or the encoded caps string of the service the ticket is for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthCapsInfo {
    pub allow_all: bool,
    /// `encode(std::string caps)` for the ticket's service (e.g. the `caps osd` line), or empty.
    pub caps: Bytes,
}
impl AuthCapsInfo {
    /// The caps text for the service (`allow *` when `allow_all`), as an OSD parses it into OSDCap.
    pub fn caps_text(&self) -> Result<String, DecodeError> {
        if self.allow_all {
            return Ok("allow *".into());
        }
        if self.caps.is_empty() {
            return Ok(String::new());
        }
        Decoder::new(self.caps.clone()).string()
    }
    pub fn from_text(caps: &str) -> Self {
        let mut e = Encoder::default();
        e.string(caps);
        AuthCapsInfo {
            allow_all: false,
            caps: e.into_bytes(),
        }
    }
}
impl Decode for AuthCapsInfo {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        version(d, "AuthCapsInfo")?;
        Ok(AuthCapsInfo {
            allow_all: d.bool()?,
            caps: d.bufferlist()?,
        })
    }
}
impl Encode for AuthCapsInfo {
    fn encode(&self, e: &mut Encoder) {
        e.u8(1);
        e.bool(self.allow_all);
        e.bytes(&self.caps);
    }
}

/// Who a ticket is for and what it allows. `renew_after` is not part of the encoding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthTicket {
    pub name: EntityName,
    pub global_id: u64,
    pub created: UTime,
    pub expires: UTime,
    pub caps: AuthCapsInfo,
    pub flags: u32,
}
impl Decode for AuthTicket {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        let v = version(d, "AuthTicket")?;
        let name = d.decode()?;
        let global_id = d.u64()?;
        if v >= 2 {
            let _old_auid = d.u64()?;
        }
        Ok(AuthTicket {
            name,
            global_id,
            created: d.decode()?,
            expires: d.decode()?,
            caps: d.decode()?,
            flags: d.u32()?,
        })
    }
}
impl Encode for AuthTicket {
    fn encode(&self, e: &mut Encoder) {
        e.u8(2);
        self.name.encode(e);
        e.u64(self.global_id);
        e.u64(AUTH_UID_DEFAULT);
        self.created.encode(e);
        self.expires.encode(e);
        self.caps.encode(e);
        e.u32(self.flags);
    }
}

/// A keyring/auth-database entry: the key and the caps per service (`mon`, `osd`, ...), each an encoded string.
/// v3 (Reef+) adds a pending key for key rotation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EntityAuth {
    pub struct_v: u8,
    pub key: CryptoKey,
    pub caps: BTreeMap<String, Bytes>,
    pub pending_key: Option<CryptoKey>,
}
impl Decode for EntityAuth {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        let struct_v = version(d, "EntityAuth")?;
        if struct_v >= 2 {
            let _old_auid = d.u64()?;
        }
        let key = d.decode()?;
        let caps = d.decode()?;
        let pending_key = if struct_v >= 3 { Some(d.decode()?) } else { None };
        Ok(EntityAuth {
            struct_v,
            key,
            caps,
            pending_key,
        })
    }
}
impl Encode for EntityAuth {
    fn encode(&self, e: &mut Encoder) {
        let v = self.struct_v.max(2);
        e.u8(v);
        e.u64(AUTH_UID_DEFAULT);
        self.key.encode(e);
        self.caps.encode(e);
        if v >= 3 {
            self.pending_key.clone().unwrap_or_default().encode(e);
        }
    }
}

impl RotatingSecrets {
    /// The secret with this id, if held.
    pub fn get(&self, secret_id: u64) -> Option<&ExpiringCryptoKey> {
        self.secrets.get(&secret_id)
    }
    /// The "current" secret: the second of three (previous, current, next), as Ceph picks it.
    pub fn current(&self) -> Option<(u64, &ExpiringCryptoKey)> {
        let mut it = self.secrets.iter();
        let first = it.next()?;
        Some(it.next().unwrap_or(first)).map(|(k, v)| (*k, v))
    }
}
