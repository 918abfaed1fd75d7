// SPDX-License-Identifier: LGPL-3.0-or-later
//! The authentication seam: msgr2 carries opaque auth payloads; what is inside them (cephx, none) lives behind
//! [`ClientAuth`] (the connector's side) and [`ServerAuth`] (the acceptor's side).
//!
//! Frame flow (`doc/dev/msgr2.rst`):
//!
//! ```text
//! connector                                   acceptor
//! AUTH_REQUEST{method, modes, payload}  -->   ServerAuth::handle_request
//!                                       <--   AUTH_REPLY_MORE{payload}     (AuthStep::More)
//! ClientAuth::handle_reply_more         -->   AUTH_REQUEST_MORE{payload} -> ServerAuth::handle_request_more
//!                                       <--   AUTH_DONE{global_id, con_mode, payload}  (AuthStep::Done)
//! ClientAuth::handle_done -> session key + connection secret
//!                                       <--   AUTH_BAD_METHOD{...}          (AuthStep::Bad)
//! ClientAuth::handle_bad_method -> another AUTH_REQUEST, or give up
//! ```
//!
//! After AUTH_DONE both sides switch to the chosen mode and exchange AUTH_SIGNATURE: HMAC-SHA256, keyed by the
//! session key, over every byte received before auth completed. An empty session key (auth none) gives an all-zero
//! signature, as in Ceph.

use bytes::Bytes;

use crate::types::EntityName;

/// `CEPH_AUTH_NONE`.
pub const AUTH_METHOD_NONE: u32 = 1;
/// `CEPH_AUTH_CEPHX`.
pub const AUTH_METHOD_CEPHX: u32 = 2;
/// `CEPH_AUTH_GSS`.
pub const AUTH_METHOD_GSS: u32 = 4;

/// `CEPH_CON_MODE_CRC`: frames protected by crc32c only.
pub const CON_MODE_CRC: u32 = 1;
/// `CEPH_CON_MODE_SECURE`: frames encrypted and authenticated with AES-128-GCM keyed from the connection secret.
pub const CON_MODE_SECURE: u32 = 2;

/// Why authentication failed. `errno` values are Ceph's (negative), for the AUTH_BAD_METHOD `result` field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("authentication rejected ({errno}): {reason}")]
    Rejected { errno: i32, reason: String },
    #[error("malformed auth payload: {0}")]
    Malformed(String),
    #[error(
        "auth method {method} is not supported (peer allows methods {allowed_methods:?}, modes {allowed_modes:?})"
    )]
    NoUsableMethod {
        method: u32,
        allowed_methods: Vec<u32>,
        allowed_modes: Vec<u32>,
    },
    #[error("auth protocol violation: {0}")]
    Protocol(String),
}

/// What both sides know when auth starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthContext {
    /// Our entity type (`CEPH_ENTITY_TYPE_*`).
    pub local_type: u8,
    /// The peer's entity type, from its HELLO.
    pub peer_type: u8,
}

/// An AUTH_REQUEST (the connector's first auth frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRequest {
    pub method: u32,
    /// Connection modes in order of preference (`CON_MODE_*`).
    pub preferred_modes: Vec<u32>,
    pub payload: Bytes,
}

/// What the connector takes away from a successful AUTH_DONE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientAuthDone {
    /// Keys AUTH_SIGNATURE (HMAC-SHA256). Empty for auth none.
    pub session_key: Bytes,
    /// Secure-mode key material (at least 40 bytes: AES key then two 12-byte nonces). Empty for crc mode.
    pub connection_secret: Bytes,
}

/// The connector's side of an auth method.
pub trait ClientAuth {
    /// Build the first AUTH_REQUEST.
    fn initial_request(&mut self, ctx: &AuthContext) -> Result<AuthRequest, AuthError>;

    /// The acceptor answered AUTH_REPLY_MORE; return the AUTH_REQUEST_MORE payload.
    fn handle_reply_more(&mut self, payload: Bytes) -> Result<Bytes, AuthError>;

    /// The acceptor answered AUTH_DONE: verify its payload and return the session key and connection secret.
    fn handle_done(
        &mut self,
        global_id: u64,
        con_mode: u32,
        payload: Bytes,
    ) -> Result<ClientAuthDone, AuthError>;

    /// The acceptor refused the method or mode (AUTH_BAD_METHOD). Return another request to try, or an error
    /// (`AuthError::NoUsableMethod`) to give up.
    fn handle_bad_method(
        &mut self,
        method: u32,
        result: i32,
        allowed_methods: &[u32],
        allowed_modes: &[u32],
    ) -> Result<AuthRequest, AuthError>;
}

/// The acceptor's answer to an AUTH_REQUEST or AUTH_REQUEST_MORE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStep {
    /// Send AUTH_REPLY_MORE with this payload and wait for AUTH_REQUEST_MORE.
    More(Bytes),
    /// Send AUTH_DONE; the session is authenticated.
    Done(ServerAuthDone),
    /// Send AUTH_BAD_METHOD; the connector may try again.
    Bad {
        /// Ceph errno (negative), e.g. -EOPNOTSUPP (-95) for an unknown method, -EACCES (-13) for bad credentials.
        result: i32,
        allowed_methods: Vec<u32>,
        allowed_modes: Vec<u32>,
    },
}

/// A completed server-side authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAuthDone {
    pub global_id: u64,
    /// The mode the acceptor chose (`CON_MODE_*`), one of the connector's preferred modes.
    pub con_mode: u32,
    /// The AUTH_DONE payload (for cephx: the session-key reply or the authorizer reply).
    pub payload: Bytes,
    /// Keys AUTH_SIGNATURE. Empty for auth none.
    pub session_key: Bytes,
    /// Secure-mode key material; required (≥ 40 bytes) when `con_mode` is secure.
    pub connection_secret: Bytes,
    /// Who the peer proved to be.
    pub peer_name: EntityName,
}

/// The acceptor's side of the auth methods it offers.
pub trait ServerAuth {
    /// Handle the first AUTH_REQUEST. Unknown methods or modes should produce [`AuthStep::Bad`].
    fn handle_request(
        &mut self,
        ctx: &AuthContext,
        method: u32,
        preferred_modes: &[u32],
        payload: Bytes,
    ) -> Result<AuthStep, AuthError>;

    /// Handle an AUTH_REQUEST_MORE (a later round of the same method).
    fn handle_request_more(&mut self, payload: Bytes) -> Result<AuthStep, AuthError>;
}

/// Auth method "none" (CEPH_AUTH_NONE) for both roles: the connector states its name and global id and is
/// believed. No session key, so only crc mode is possible.
///
/// The AUTH_REQUEST payload follows what Ceph's clients send: to a monitor `u8 auth_mode (AUTH_MODE_MON = 10),
/// EntityName, u64 global_id` (the same prefix cephx uses, as seen in real captures); to other daemons the
/// AuthNone authorizer `u8 1 (struct_v), EntityName, u64 global_id`.
#[derive(Debug, Clone)]
pub struct AuthNone {
    pub name: EntityName,
    pub global_id: u64,
}

/// Auth modes of a monitor AUTH_REQUEST (`src/auth/Auth.h`).
pub const AUTH_MODE_MON: u32 = 10;

impl AuthNone {
    pub fn new(name: EntityName, global_id: u64) -> Self {
        AuthNone { name, global_id }
    }

    fn payload(&self, peer_type: u8) -> Bytes {
        let mut e = denc::Encoder::default();
        if peer_type == crate::types::ENTITY_TYPE_MON {
            e.u8(AUTH_MODE_MON as u8);
        } else {
            e.u8(1);
        }
        denc::Encode::encode(&self.name, &mut e);
        e.u64(self.global_id);
        e.into_bytes()
    }
}

impl ClientAuth for AuthNone {
    fn initial_request(&mut self, ctx: &AuthContext) -> Result<AuthRequest, AuthError> {
        Ok(AuthRequest {
            method: AUTH_METHOD_NONE,
            preferred_modes: vec![CON_MODE_CRC],
            payload: self.payload(ctx.peer_type),
        })
    }

    fn handle_reply_more(&mut self, _payload: Bytes) -> Result<Bytes, AuthError> {
        Err(AuthError::Protocol("auth none has no second round".into()))
    }

    fn handle_done(
        &mut self,
        global_id: u64,
        _con_mode: u32,
        _payload: Bytes,
    ) -> Result<ClientAuthDone, AuthError> {
        if global_id != 0 {
            self.global_id = global_id;
        }
        Ok(ClientAuthDone::default())
    }

    fn handle_bad_method(
        &mut self,
        method: u32,
        _result: i32,
        allowed_methods: &[u32],
        allowed_modes: &[u32],
    ) -> Result<AuthRequest, AuthError> {
        Err(AuthError::NoUsableMethod {
            method,
            allowed_methods: allowed_methods.to_vec(),
            allowed_modes: allowed_modes.to_vec(),
        })
    }
}

/// The acceptor side of auth none: accepts anyone, assigns `next_global_id` when the peer asks for 0.
#[derive(Debug, Clone)]
pub struct AuthNoneServer {
    pub next_global_id: u64,
}

impl Default for AuthNoneServer {
    fn default() -> Self {
        AuthNoneServer { next_global_id: 4096 }
    }
}

impl ServerAuth for AuthNoneServer {
    fn handle_request(
        &mut self,
        ctx: &AuthContext,
        method: u32,
        preferred_modes: &[u32],
        payload: Bytes,
    ) -> Result<AuthStep, AuthError> {
        if method != AUTH_METHOD_NONE || !preferred_modes.contains(&CON_MODE_CRC) {
            return Ok(AuthStep::Bad {
                result: -95, // EOPNOTSUPP
                allowed_methods: vec![AUTH_METHOD_NONE],
                allowed_modes: vec![CON_MODE_CRC],
            });
        }
        let mut d = denc::Decoder::new(payload);
        let malformed = |e: denc::DecodeError| AuthError::Malformed(e.to_string());
        let v = d.u8().map_err(malformed)?;
        let want = if ctx.local_type == crate::types::ENTITY_TYPE_MON {
            AUTH_MODE_MON as u8
        } else {
            1
        };
        if v != want {
            return Err(AuthError::Malformed(format!(
                "auth none payload starts with {v}, expected {want}"
            )));
        }
        let peer_name = <EntityName as denc::Decode>::decode(&mut d).map_err(malformed)?;
        let mut global_id = d.u64().map_err(malformed)?;
        if global_id == 0 {
            global_id = self.next_global_id;
            self.next_global_id += 1;
        }
        Ok(AuthStep::Done(ServerAuthDone {
            global_id,
            con_mode: CON_MODE_CRC,
            payload: Bytes::new(),
            session_key: Bytes::new(),
            connection_secret: Bytes::new(),
            peer_name,
        }))
    }

    fn handle_request_more(&mut self, _payload: Bytes) -> Result<AuthStep, AuthError> {
        Err(AuthError::Protocol("auth none has no second round".into()))
    }
}
