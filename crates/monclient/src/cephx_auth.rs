// SPDX-License-Identifier: LGPL-3.0-or-later
//! cephx as msgr2's [`ClientAuth`] for monitor connections: the glue between `cephx::MonAuthClient` (sans-IO
//! cephx) and the msgr2 AUTH frames. Ticket validity needs the wall clock, so this lives with the IO driver.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use cephx::{CryptoKey, CryptoProvider, MonAuthClient};
use msgr2::auth::{
    AUTH_METHOD_CEPHX, AuthContext, AuthError, AuthRequest, CON_MODE_CRC, CON_MODE_SECURE, ClientAuth,
    ClientAuthDone,
};

/// Tickets a client wants: mon, osd and mgr (`CEPH_ENTITY_TYPE_*` bits).
pub const WANT_MON_OSD_MGR: u32 = 0x01 | 0x04 | 0x10;

/// Parse Ceph's `ms_mon_client_mode` value ("secure crc", "crc", ...) into msgr2 connection modes.
pub fn parse_modes(s: &str) -> Vec<u32> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|m| match m {
            "secure" => Some(CON_MODE_SECURE),
            "crc" => Some(CON_MODE_CRC),
            _ => None,
        })
        .collect()
}

/// One monitor connection's cephx state.
pub struct CephxMonAuth {
    inner: MonAuthClient,
    modes: Vec<u32>,
}

impl CephxMonAuth {
    /// `name` is e.g. `client.admin`; `want_keys` the services to get tickets for (cephx `ENTITY_TYPE_*` bits).
    pub fn new(
        provider: Arc<dyn CryptoProvider>,
        name: cephx::EntityName,
        key: CryptoKey,
        want_keys: u32,
        modes: Vec<u32>,
    ) -> Self {
        CephxMonAuth {
            inner: MonAuthClient::new(provider, name, key, want_keys),
            modes,
        }
    }

    pub fn inner(&self) -> &MonAuthClient {
        &self.inner
    }
}

fn now_utime() -> cephx::UTime {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    cephx::UTime::new(u32::try_from(d.as_secs()).unwrap_or(u32::MAX), d.subsec_nanos())
}

fn auth_err(e: cephx::CephxError) -> AuthError {
    match e {
        cephx::CephxError::Rejected { errno } => AuthError::Rejected {
            errno,
            reason: e.to_string(),
        },
        other => AuthError::Malformed(other.to_string()),
    }
}

impl ClientAuth for CephxMonAuth {
    fn initial_request(&mut self, _ctx: &AuthContext) -> Result<AuthRequest, AuthError> {
        Ok(AuthRequest {
            method: AUTH_METHOD_CEPHX,
            preferred_modes: self.modes.clone(),
            payload: self.inner.initial_request(),
        })
    }

    fn handle_reply_more(&mut self, payload: Bytes) -> Result<Bytes, AuthError> {
        self.inner.handle_reply_more(&payload).map_err(auth_err)
    }

    fn handle_done(
        &mut self,
        global_id: u64,
        _con_mode: u32,
        payload: Bytes,
    ) -> Result<ClientAuthDone, AuthError> {
        let s = self
            .inner
            .handle_done(global_id, &payload, now_utime())
            .map_err(auth_err)?;
        Ok(ClientAuthDone {
            session_key: s.session_key.secret.clone(),
            connection_secret: s.connection_secret,
        })
    }

    fn handle_bad_method(
        &mut self,
        method: u32,
        result: i32,
        allowed_methods: &[u32],
        allowed_modes: &[u32],
    ) -> Result<AuthRequest, AuthError> {
        if allowed_methods.contains(&AUTH_METHOD_CEPHX) {
            // The method is fine, our modes were not: retry with the modes the mon allows, if we allow them too.
            let modes: Vec<u32> = self
                .modes
                .iter()
                .copied()
                .filter(|m| allowed_modes.contains(m))
                .collect();
            if !modes.is_empty() && modes != self.modes && method == AUTH_METHOD_CEPHX {
                self.modes = modes.clone();
                return Ok(AuthRequest {
                    method: AUTH_METHOD_CEPHX,
                    preferred_modes: modes,
                    payload: self.inner.initial_request(),
                });
            }
        }
        if result < 0 && allowed_methods.contains(&method) {
            return Err(AuthError::Rejected {
                errno: result,
                reason: format!("monitor refused cephx (error {result})"),
            });
        }
        Err(AuthError::NoUsableMethod {
            method,
            allowed_methods: allowed_methods.to_vec(),
            allowed_modes: allowed_modes.to_vec(),
        })
    }
}
