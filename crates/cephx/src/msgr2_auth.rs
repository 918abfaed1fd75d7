// SPDX-License-Identifier: LGPL-3.0-or-later
//! cephx behind msgr2's auth seam (`msgr2::auth::{ClientAuth, ServerAuth}`).
//!
//! * [`CephxMonClientAuth`]: a connection to a monitor (AUTH_MODE_MON, challenge, session key, connection secret).
//!   The [`MonAuthClient`] is shared so that the same principal later builds ticket requests and authorizers;
//!   [`CephxMonClientAuth::per_attempt`] gives each parallel hunting attempt its own fork of it.
//! * [`CephxAuthorizerClientAuth`]: a connection to an OSD or mgr with an authorizer (CEPHX_V2 challenge).
//! * [`CephxServerAuth`]: a daemon accepting connections: verifies authorizers with its rotating keys and, if
//!   configured (`auth_*_required = none`), also accepts auth none.
//! * [`CephxMonServerAuth`]: the monitor's side, backed by [`MonAuthServer`] (tests, simulations).

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use bytes::Bytes;
use msgr2::auth::{
    AUTH_METHOD_CEPHX, AUTH_METHOD_NONE, AuthContext, AuthError, AuthNone, AuthNoneServer, AuthRequest,
    AuthStep, CON_MODE_CRC, CON_MODE_SECURE, ClientAuth, ClientAuthDone, ServerAuth, ServerAuthDone,
};

use crate::client::{Authorizer, MonAuthClient};
use crate::crypto::CryptoProvider;
use crate::error::{CephxError, EACCES, EOPNOTSUPP};
use crate::service::{
    MonAuthConnection, MonAuthServer, PeerAuth, ServiceAuthorizerVerifier, ServiceKeys, ServiceStep,
};
use crate::types::UTime;

/// Bytes of connection secret Ceph generates for secure mode (`AuthConnectionMeta::get_connection_secret_length`).
pub const SECURE_CONNECTION_SECRET_LEN: usize = 64;

fn to_auth_error(e: CephxError) -> AuthError {
    match e {
        CephxError::Decode(d) => AuthError::Malformed(d.to_string()),
        CephxError::Protocol(p) => AuthError::Protocol(p),
        e => AuthError::Rejected {
            errno: -e.errno(),
            reason: e.to_string(),
        },
    }
}

fn bad_method(method: u32, result: i32, allowed_methods: &[u32], allowed_modes: &[u32]) -> AuthError {
    if result < 0 {
        // The server refused our credentials (cephx: -EACCES for a wrong key) rather than the method.
        let e = CephxError::Rejected { errno: result };
        AuthError::Rejected {
            errno: result,
            reason: e.to_string(),
        }
    } else {
        AuthError::NoUsableMethod {
            method,
            allowed_methods: allowed_methods.to_vec(),
            allowed_modes: allowed_modes.to_vec(),
        }
    }
}

/// When the peer refuses cephx but allows auth none (`auth_*_required = none`), switch to auth none as Ceph's
/// clients do; otherwise report why.
fn fallback_to_none(
    none: &mut Option<AuthNone>,
    active: &mut bool,
    ctx: &AuthContext,
    method: u32,
    result: i32,
    allowed_methods: &[u32],
    allowed_modes: &[u32],
) -> Result<AuthRequest, AuthError> {
    // The method echoed back is not relied on (some acceptors send 0): we only ever try cephx, then none.
    if !*active
        && allowed_methods.contains(&AUTH_METHOD_NONE)
        && !allowed_methods.contains(&AUTH_METHOD_CEPHX)
        && let Some(n) = none.as_mut()
    {
        *active = true;
        return n.initial_request(ctx);
    }
    Err(bad_method(method, result, allowed_methods, allowed_modes))
}

/// Tickets a client wants from the monitor: mon, osd and mgr.
pub const WANT_MON_OSD_MGR: u32 =
    crate::types::ENTITY_TYPE_MON | crate::types::ENTITY_TYPE_OSD | crate::types::ENTITY_TYPE_MGR;

/// Parse a Ceph connection-mode option (`ms_mon_client_mode` etc.: "secure crc", "crc, secure", ...) into msgr2
/// modes in order of preference; unknown words are ignored.
pub fn parse_modes(s: &str) -> Vec<u32> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|m| match m {
            "secure" => Some(CON_MODE_SECURE),
            "crc" => Some(CON_MODE_CRC),
            _ => None,
        })
        .collect()
}

/// A wall clock given by the IO layer (cephx itself reads no clock).
pub type Clock = Arc<dyn Fn() -> UTime + Send + Sync>;

/// The connector side of a monitor connection.
///
/// Two ways to hold the principal's [`MonAuthClient`]:
/// * [`CephxMonClientAuth::new`]: this connection drives the shared client directly (one connection at a time,
///   e.g. a daemon that hunts serially and keeps using the same client for tickets and authorizers);
/// * [`CephxMonClientAuth::per_attempt`]: this connection drives its own [`MonAuthClient::fork`] of the shared one
///   and publishes it back only once authenticated, so parallel hunting attempts never interleave their
///   handshakes, and the next attempt reclaims the global id with the newest AUTH ticket.
pub struct CephxMonClientAuth {
    /// The client this connection authenticates with (its own fork for [`CephxMonClientAuth::per_attempt`]).
    pub client: Arc<Mutex<MonAuthClient>>,
    /// Where a per-attempt fork is published once authenticated.
    publish_to: Option<Arc<Mutex<MonAuthClient>>>,
    /// Connection modes in order of preference (Pacific's `ms_mon_client_mode` default: secure, crc).
    pub modes: Vec<u32>,
    /// The wall-clock time to stamp ticket expiries with (the core takes no clock of its own).
    pub now: UTime,
    /// If set, read at AUTH_DONE instead of `now` (a connection attempt may wait a while for its monitor).
    pub clock: Option<Clock>,
    /// Auth none to fall back to when the monitor allows only that (`None` disables the fallback).
    pub fallback_none: Option<AuthNone>,
    using_none: bool,
    ctx: Option<AuthContext>,
}

impl CephxMonClientAuth {
    pub fn new(client: Arc<Mutex<MonAuthClient>>, now: UTime) -> Self {
        let (name, global_id) = {
            let c = client.lock().unwrap_or_else(PoisonError::into_inner);
            (c.name().clone(), c.global_id())
        };
        CephxMonClientAuth {
            client,
            publish_to: None,
            modes: vec![CON_MODE_SECURE, CON_MODE_CRC],
            now,
            clock: None,
            fallback_none: Some(AuthNone::new(
                msgr2::EntityName {
                    ty: name.ty,
                    id: name.id,
                },
                global_id,
            )),
            using_none: false,
            ctx: None,
        }
    }

    /// One connection attempt on its own fork of `shared`; `shared` is replaced by the fork once this attempt
    /// authenticates.
    pub fn per_attempt(shared: &Arc<Mutex<MonAuthClient>>, now: UTime) -> Self {
        let fork = shared.lock().unwrap_or_else(PoisonError::into_inner).fork();
        let mut a = CephxMonClientAuth::new(Arc::new(Mutex::new(fork)), now);
        a.publish_to = Some(shared.clone());
        a
    }

    /// Set the connection modes in order of preference.
    pub fn with_modes(mut self, modes: Vec<u32>) -> Self {
        self.modes = modes;
        self
    }

    /// Read the time from `clock` when the monitor's AUTH_DONE arrives.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    fn request(&self, c: &mut MonAuthClient) -> AuthRequest {
        AuthRequest {
            method: AUTH_METHOD_CEPHX,
            preferred_modes: self.modes.clone(),
            payload: c.initial_request(),
        }
    }
}

impl ClientAuth for CephxMonClientAuth {
    fn initial_request(&mut self, ctx: &AuthContext) -> Result<AuthRequest, AuthError> {
        self.ctx = Some(ctx.clone());
        self.using_none = false;
        let mut c = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(self.request(&mut c))
    }

    fn handle_reply_more(&mut self, payload: Bytes) -> Result<Bytes, AuthError> {
        if self.using_none {
            return Err(AuthError::Protocol("auth none has no second round".into()));
        }
        let mut c = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        c.handle_reply_more(&payload).map_err(to_auth_error)
    }

    fn handle_done(
        &mut self,
        global_id: u64,
        con_mode: u32,
        payload: Bytes,
    ) -> Result<ClientAuthDone, AuthError> {
        if self.using_none
            && let Some(n) = self.fallback_none.as_mut()
        {
            return n.handle_done(global_id, con_mode, payload);
        }
        let now = self.clock.as_ref().map_or(self.now, |clock| clock());
        let mut c = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        let s = c.handle_done(global_id, &payload, now).map_err(to_auth_error)?;
        if let Some(shared) = &self.publish_to {
            *shared.lock().unwrap_or_else(PoisonError::into_inner) = c.clone();
        }
        Ok(ClientAuthDone {
            session_key: s.session_key.secret,
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
        let ctx = self
            .ctx
            .clone()
            .ok_or_else(|| AuthError::Protocol("AUTH_BAD_METHOD before a request".into()))?;
        // cephx is fine but none of our modes was: retry once with the modes both sides allow.
        if !self.using_none && method == AUTH_METHOD_CEPHX && allowed_methods.contains(&AUTH_METHOD_CEPHX) {
            let modes: Vec<u32> = self
                .modes
                .iter()
                .copied()
                .filter(|m| allowed_modes.contains(m))
                .collect();
            if !modes.is_empty() && modes != self.modes {
                self.modes = modes;
                let mut c = self.client.lock().unwrap_or_else(PoisonError::into_inner);
                return Ok(self.request(&mut c));
            }
        }
        fallback_to_none(
            &mut self.fallback_none,
            &mut self.using_none,
            &ctx,
            method,
            result,
            allowed_methods,
            allowed_modes,
        )
    }
}

/// The connector side of a connection to an OSD or mgr, presenting an authorizer.
pub struct CephxAuthorizerClientAuth {
    pub authorizer: Authorizer,
    /// Pacific's `ms_client_mode` / `ms_cluster_mode` default: crc, secure.
    pub modes: Vec<u32>,
    /// Auth none to fall back to when the daemon allows only that; set it with the principal's name.
    pub fallback_none: Option<AuthNone>,
    using_none: bool,
    ctx: Option<AuthContext>,
}

impl CephxAuthorizerClientAuth {
    pub fn new(authorizer: Authorizer) -> Self {
        CephxAuthorizerClientAuth {
            authorizer,
            modes: vec![CON_MODE_CRC, CON_MODE_SECURE],
            fallback_none: None,
            using_none: false,
            ctx: None,
        }
    }
}

impl ClientAuth for CephxAuthorizerClientAuth {
    fn initial_request(&mut self, ctx: &AuthContext) -> Result<AuthRequest, AuthError> {
        self.ctx = Some(ctx.clone());
        self.using_none = false;
        Ok(AuthRequest {
            method: AUTH_METHOD_CEPHX,
            preferred_modes: self.modes.clone(),
            payload: self.authorizer.payload().clone(),
        })
    }

    fn handle_reply_more(&mut self, payload: Bytes) -> Result<Bytes, AuthError> {
        if self.using_none {
            return Err(AuthError::Protocol("auth none has no second round".into()));
        }
        self.authorizer.add_challenge(&payload).map_err(to_auth_error)
    }

    fn handle_done(
        &mut self,
        global_id: u64,
        con_mode: u32,
        payload: Bytes,
    ) -> Result<ClientAuthDone, AuthError> {
        if self.using_none
            && let Some(n) = self.fallback_none.as_mut()
        {
            return n.handle_done(global_id, con_mode, payload);
        }
        let connection_secret = self.authorizer.verify_reply(&payload).map_err(to_auth_error)?;
        Ok(ClientAuthDone {
            session_key: self.authorizer.session_key.secret.clone(),
            connection_secret,
        })
    }

    fn handle_bad_method(
        &mut self,
        method: u32,
        result: i32,
        allowed_methods: &[u32],
        allowed_modes: &[u32],
    ) -> Result<AuthRequest, AuthError> {
        let ctx = self
            .ctx
            .clone()
            .ok_or_else(|| AuthError::Protocol("AUTH_BAD_METHOD before a request".into()))?;
        fallback_to_none(
            &mut self.fallback_none,
            &mut self.using_none,
            &ctx,
            method,
            result,
            allowed_methods,
            allowed_modes,
        )
    }
}

/// The acceptor side for a daemon: cephx authorizers (and auth none when allowed).
pub struct CephxServerAuth {
    verifier: ServiceAuthorizerVerifier,
    /// The daemon's keys; shared so that rotating-key refreshes reach every connection.
    pub keys: Arc<RwLock<ServiceKeys>>,
    /// Methods accepted, in preference order (`auth_cluster_required` / `auth_service_required`).
    pub methods: Vec<u32>,
    /// Modes accepted, in preference order (Pacific's `ms_service_mode` default: crc, secure).
    pub modes: Vec<u32>,
    none: AuthNoneServer,
    chosen_mode: u32,
    /// The last authenticated peer (name, global id, caps), for the daemon to read after AUTH_DONE.
    pub peer: Arc<Mutex<Option<PeerAuth>>>,
}

impl CephxServerAuth {
    pub fn new(provider: Arc<dyn CryptoProvider>, keys: Arc<RwLock<ServiceKeys>>) -> Self {
        CephxServerAuth {
            verifier: ServiceAuthorizerVerifier::new(provider),
            keys,
            methods: vec![AUTH_METHOD_CEPHX],
            modes: vec![CON_MODE_CRC, CON_MODE_SECURE],
            none: AuthNoneServer::default(),
            chosen_mode: CON_MODE_CRC,
            peer: Arc::new(Mutex::new(None)),
        }
    }

    fn bad(&self, result: i32) -> AuthStep {
        AuthStep::Bad {
            result,
            allowed_methods: self.methods.clone(),
            allowed_modes: self.modes.clone(),
        }
    }

    fn step(&mut self, payload: &[u8]) -> AuthStep {
        let secret_len = if self.chosen_mode == CON_MODE_SECURE {
            SECURE_CONNECTION_SECRET_LEN
        } else {
            0
        };
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        match self.verifier.verify(&*keys, payload, secret_len) {
            Ok(ServiceStep::Challenge(c)) => AuthStep::More(c),
            Ok(ServiceStep::Done {
                reply,
                peer,
                connection_secret,
            }) => {
                let done = ServerAuthDone {
                    global_id: peer.global_id,
                    con_mode: self.chosen_mode,
                    payload: reply,
                    session_key: peer.session_key.secret.clone(),
                    connection_secret,
                    peer_name: msgr2::EntityName {
                        ty: peer.name.ty,
                        id: peer.name.id.clone(),
                    },
                };
                *self.peer.lock().unwrap_or_else(PoisonError::into_inner) = Some(peer);
                AuthStep::Done(done)
            }
            Err(_) => self.bad(-EACCES),
        }
    }
}

impl ServerAuth for CephxServerAuth {
    fn handle_request(
        &mut self,
        ctx: &AuthContext,
        method: u32,
        preferred_modes: &[u32],
        payload: Bytes,
    ) -> Result<AuthStep, AuthError> {
        if !self.methods.contains(&method) {
            return Ok(self.bad(-EOPNOTSUPP));
        }
        if method == AUTH_METHOD_NONE {
            return self.none.handle_request(ctx, method, preferred_modes, payload);
        }
        if method != AUTH_METHOD_CEPHX {
            return Ok(self.bad(-EOPNOTSUPP));
        }
        // The connector's preference wins among the modes we allow (as Ceph's AuthRegistry::pick_mode does).
        let Some(mode) = preferred_modes.iter().copied().find(|m| self.modes.contains(m)) else {
            return Ok(self.bad(-EOPNOTSUPP));
        };
        self.chosen_mode = mode;
        Ok(self.step(&payload))
    }

    fn handle_request_more(&mut self, payload: Bytes) -> Result<AuthStep, AuthError> {
        Ok(self.step(&payload))
    }
}

/// The acceptor side of a monitor: cephx principals authenticate against a shared [`MonAuthServer`].
pub struct CephxMonServerAuth {
    pub server: Arc<Mutex<MonAuthServer>>,
    /// This connection's state (the authenticated name and session key afterwards).
    pub conn: MonAuthConnection,
    /// Modes accepted (Pacific's `ms_mon_service_mode` default: secure, crc).
    pub modes: Vec<u32>,
    /// The wall-clock time for ticket timestamps.
    pub now: UTime,
    chosen_mode: u32,
}

impl CephxMonServerAuth {
    pub fn new(server: Arc<Mutex<MonAuthServer>>, now: UTime) -> Self {
        CephxMonServerAuth {
            server,
            conn: MonAuthConnection::default(),
            modes: vec![CON_MODE_SECURE, CON_MODE_CRC],
            now,
            chosen_mode: CON_MODE_SECURE,
        }
    }

    fn bad(&self, result: i32) -> AuthStep {
        AuthStep::Bad {
            result,
            allowed_methods: vec![AUTH_METHOD_CEPHX],
            allowed_modes: self.modes.clone(),
        }
    }
}

impl ServerAuth for CephxMonServerAuth {
    fn handle_request(
        &mut self,
        _ctx: &AuthContext,
        method: u32,
        preferred_modes: &[u32],
        payload: Bytes,
    ) -> Result<AuthStep, AuthError> {
        if method != AUTH_METHOD_CEPHX {
            return Ok(self.bad(-EOPNOTSUPP));
        }
        let Some(mode) = preferred_modes.iter().copied().find(|m| self.modes.contains(m)) else {
            return Ok(self.bad(-EOPNOTSUPP));
        };
        self.chosen_mode = mode;
        let mut server = self.server.lock().unwrap_or_else(PoisonError::into_inner);
        match server.handle_initial(&mut self.conn, &payload) {
            Ok(challenge) => Ok(AuthStep::More(challenge)),
            Err(e) => Err(to_auth_error(e)),
        }
    }

    fn handle_request_more(&mut self, payload: Bytes) -> Result<AuthStep, AuthError> {
        let secret_len = if self.chosen_mode == CON_MODE_SECURE {
            SECURE_CONNECTION_SECRET_LEN
        } else {
            0
        };
        let mut server = self.server.lock().unwrap_or_else(PoisonError::into_inner);
        match server.handle_authenticate(&mut self.conn, &payload, secret_len, self.now) {
            Ok((global_id, reply)) => {
                let name = self.conn.name().cloned().unwrap_or_default();
                Ok(AuthStep::Done(ServerAuthDone {
                    global_id,
                    con_mode: self.chosen_mode,
                    payload: reply,
                    session_key: self
                        .conn
                        .session_key
                        .as_ref()
                        .map(|k| k.secret.clone())
                        .unwrap_or_default(),
                    connection_secret: self.conn.connection_secret.clone(),
                    peer_name: msgr2::EntityName {
                        ty: name.ty,
                        id: name.id,
                    },
                }))
            }
            Err(errno) => Ok(self.bad(errno)),
        }
    }
}
