// SPDX-License-Identifier: LGPL-3.0-or-later
//! A deliberately insecure auth method for tests: it proves nothing, but it produces a session key and a
//! connection secret, so AUTH_SIGNATURE and secure mode are exercised end to end without cephx. It takes two
//! rounds (AUTH_REQUEST → AUTH_REPLY_MORE → AUTH_REQUEST_MORE → AUTH_DONE), like cephx does. Never offer it on a
//! real network.

use bytes::Bytes;

use crate::auth::{
    AuthContext, AuthError, AuthRequest, AuthStep, CON_MODE_CRC, CON_MODE_SECURE, ClientAuth, ClientAuthDone,
    ServerAuth, ServerAuthDone,
};
use crate::types::EntityName;

/// Method number for the test method (outside Ceph's range so a real peer refuses it).
pub const AUTH_METHOD_TEST: u32 = 0x7e57;

/// Client side: asks for `modes` (preference order), sends `name`, echoes the server's challenge.
#[derive(Debug, Clone)]
pub struct TestClientAuth {
    pub name: EntityName,
    pub modes: Vec<u32>,
    pub challenge_seen: Option<u64>,
}

impl TestClientAuth {
    pub fn new(name: EntityName, modes: Vec<u32>) -> Self {
        TestClientAuth {
            name,
            modes,
            challenge_seen: None,
        }
    }
}

/// Server side: challenges once, then hands out `session_key` and `connection_secret` in the AUTH_DONE payload
/// (in clear: this is the insecure part). Picks the first of the client's modes it allows.
#[derive(Debug, Clone)]
pub struct TestServerAuth {
    pub allowed_modes: Vec<u32>,
    pub session_key: Bytes,
    pub connection_secret: Bytes,
    pub challenge: u64,
    pub reject: bool,
    peer: Option<(EntityName, Vec<u32>)>,
}

impl TestServerAuth {
    pub fn new(allowed_modes: Vec<u32>, session_key: &[u8], connection_secret: &[u8]) -> Self {
        TestServerAuth {
            allowed_modes,
            session_key: Bytes::copy_from_slice(session_key),
            connection_secret: Bytes::copy_from_slice(connection_secret),
            challenge: 0xC0FFEE,
            reject: false,
            peer: None,
        }
    }
}

impl ClientAuth for TestClientAuth {
    fn initial_request(&mut self, _ctx: &AuthContext) -> Result<AuthRequest, AuthError> {
        let mut e = denc::Encoder::default();
        denc::Encode::encode(&self.name, &mut e);
        Ok(AuthRequest {
            method: AUTH_METHOD_TEST,
            preferred_modes: self.modes.clone(),
            payload: e.into_bytes(),
        })
    }

    fn handle_reply_more(&mut self, payload: Bytes) -> Result<Bytes, AuthError> {
        let c = denc::Decoder::new(payload)
            .u64()
            .map_err(|e| AuthError::Malformed(e.to_string()))?;
        self.challenge_seen = Some(c);
        let mut e = denc::Encoder::default();
        e.u64(c ^ 0xFFFF);
        Ok(e.into_bytes())
    }

    fn handle_done(
        &mut self,
        _global_id: u64,
        con_mode: u32,
        payload: Bytes,
    ) -> Result<ClientAuthDone, AuthError> {
        let mut d = denc::Decoder::new(payload);
        let err = |e: denc::DecodeError| AuthError::Malformed(e.to_string());
        let session_key = d.bufferlist().map_err(err)?;
        let connection_secret = d.bufferlist().map_err(err)?;
        if con_mode == CON_MODE_SECURE && connection_secret.len() < 40 {
            return Err(AuthError::Protocol(
                "secure mode without a connection secret".into(),
            ));
        }
        Ok(ClientAuthDone {
            session_key,
            connection_secret,
        })
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

impl ServerAuth for TestServerAuth {
    fn handle_request(
        &mut self,
        _ctx: &AuthContext,
        method: u32,
        preferred_modes: &[u32],
        payload: Bytes,
    ) -> Result<AuthStep, AuthError> {
        let mode = preferred_modes.iter().find(|m| self.allowed_modes.contains(m));
        if method != AUTH_METHOD_TEST || mode.is_none() || self.reject {
            return Ok(AuthStep::Bad {
                result: -13,
                allowed_methods: vec![AUTH_METHOD_TEST],
                allowed_modes: self.allowed_modes.clone(),
            });
        }
        let name = <EntityName as denc::Decode>::decode(&mut denc::Decoder::new(payload))
            .map_err(|e| AuthError::Malformed(e.to_string()))?;
        self.peer = Some((name, preferred_modes.to_vec()));
        let mut e = denc::Encoder::default();
        e.u64(self.challenge);
        Ok(AuthStep::More(e.into_bytes()))
    }

    fn handle_request_more(&mut self, payload: Bytes) -> Result<AuthStep, AuthError> {
        let Some((name, modes)) = self.peer.clone() else {
            return Err(AuthError::Protocol(
                "AUTH_REQUEST_MORE before AUTH_REQUEST".into(),
            ));
        };
        let answer = denc::Decoder::new(payload)
            .u64()
            .map_err(|e| AuthError::Malformed(e.to_string()))?;
        if answer != self.challenge ^ 0xFFFF {
            return Err(AuthError::Rejected {
                errno: -13,
                reason: "bad challenge response".into(),
            });
        }
        let con_mode = modes
            .iter()
            .copied()
            .find(|m| self.allowed_modes.contains(m))
            .unwrap_or(CON_MODE_CRC);
        let mut e = denc::Encoder::default();
        e.bytes(&self.session_key);
        e.bytes(&self.connection_secret);
        Ok(AuthStep::Done(ServerAuthDone {
            global_id: 4242,
            con_mode,
            payload: e.into_bytes(),
            session_key: self.session_key.clone(),
            connection_secret: self.connection_secret.clone(),
            peer_name: name,
        }))
    }
}
