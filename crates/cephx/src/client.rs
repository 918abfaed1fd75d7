// SPDX-License-Identifier: LGPL-3.0-or-later
//! The principal's side of cephx, sans-IO: authenticate to a monitor with the entity key, hold the tickets it
//! hands out, fetch rotating service keys (daemons), and build authorizers for connections to OSDs and mgrs.
//!
//! msgr2 flow with a monitor (`src/mon/MonClient.cc`, `src/auth/cephx/CephxClientHandler.cc`):
//!
//! ```text
//! AUTH_REQUEST      u8 AUTH_MODE_MON, EntityName, u64 global_id          MonAuthClient::initial_request
//! AUTH_REPLY_MORE   CephXServerChallenge                                  MonAuthClient::handle_reply_more
//! AUTH_REQUEST_MORE CephXRequestHeader(0x100), CephXAuthenticate v3      (its return value)
//! AUTH_DONE         CephXResponseHeader, ticket reply, bl cbl, bl extra   MonAuthClient::handle_done
//! ```
//!
//! Later MAuth round trips carry [`MonAuthClient::build_ticket_request`] (CEPHX_GET_PRINCIPAL_SESSION_KEY) and
//! [`MonAuthClient::build_rotating_request`] (CEPHX_GET_ROTATING_KEY); their replies go to
//! [`MonAuthClient::handle_response`].

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use denc::{Decode, Decoder, Encode, Encoder};

use crate::crypto::{CryptoKey, CryptoProvider, decode_decrypt, decrypt_enc_bl, encode_encrypt};
use crate::error::CephxError;
use crate::types::*;

/// `cephx_calc_client_server_challenge`: encrypt the two challenges with the entity key and XOR every complete
/// little-endian u64 of the *length-prefixed* ciphertext (36 bytes: the words cover the le32 length and the
/// first 28 bytes of ciphertext). The monitor recomputes this to check that the client knows its key.
pub fn calc_client_server_challenge(
    provider: &dyn CryptoProvider,
    secret: &CryptoKey,
    server_challenge: u64,
    client_challenge: u64,
) -> Result<u64, CephxError> {
    let mut e = Encoder::default();
    encode_encrypt(
        provider,
        secret,
        &CephXChallengeBlob {
            server_challenge,
            client_challenge,
        },
        &mut e,
    )?;
    Ok(e.as_slice()
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
        .fold(0, |a, w| a ^ w))
}

/// One service's ticket as the principal holds it (`CephXTicketHandler`).
#[derive(Debug, Clone, Default)]
pub struct TicketHandler {
    pub service_id: u32,
    pub session_key: CryptoKey,
    pub ticket: CephXTicketBlob,
    /// When the ticket stops being valid; `None` when the server gave no validity.
    pub expires: Option<UTime>,
    /// When to ask for a new one (expiry − validity/4, as Ceph does).
    pub renew_after: Option<UTime>,
    have_key: bool,
}

impl TicketHandler {
    pub fn have_key(&self, now: UTime) -> bool {
        self.have_key && self.expires.is_none_or(|e| now < e)
    }
    pub fn need_key(&self, now: UTime) -> bool {
        if self.have_key {
            self.renew_after.is_some_and(|r| now >= r)
        } else {
            true
        }
    }
}

/// The tickets of one principal, by service id (`CephXTicketManager`).
#[derive(Debug, Clone, Default)]
pub struct TicketManager {
    pub tickets: BTreeMap<u32, TicketHandler>,
}

impl TicketManager {
    /// Parse a ticket reply (`u8 1, u32 n, n × {u32 service, u8 1, {CephXServiceTicket}secret, u8 enc, blob}`) and
    /// store each ticket. An encrypted ticket blob is encrypted with the *previous* session key of that service.
    /// Returns the services updated.
    pub fn verify_service_ticket_reply(
        &mut self,
        provider: &dyn CryptoProvider,
        secret: &CryptoKey,
        d: &mut Decoder,
        now: UTime,
    ) -> Result<Vec<u32>, CephxError> {
        let _reply_v = d.u8()?;
        let n = d.length("ticket reply", 1)?;
        let mut updated = Vec::with_capacity(n.min(8));
        for _ in 0..n {
            let service_id = d.u32()?;
            let _ticket_v = d.u8()?;
            let msg_a: CephXServiceTicket = decode_decrypt(provider, secret, d)?;
            let ticket_enc = d.u8()? != 0;
            let handler = self.tickets.entry(service_id).or_default();
            let ticket_bl: Bytes = if ticket_enc {
                decode_decrypt(provider, &handler.session_key, d)?
            } else {
                d.bufferlist()?
            };
            let ticket = CephXTicketBlob::decode(&mut Decoder::new(ticket_bl))?;
            handler.service_id = service_id;
            handler.ticket = ticket;
            handler.session_key = msg_a.session_key;
            if msg_a.validity.is_zero() {
                handler.expires = None;
                handler.renew_after = None;
            } else {
                let expires = utime_add(now, msg_a.validity);
                handler.expires = Some(expires);
                handler.renew_after = Some(utime_from_nanos(
                    expires
                        .as_nanos()
                        .saturating_sub(u64::from(msg_a.validity.sec) * 1_000_000_000 / 4),
                ));
            }
            handler.have_key = true;
            updated.push(service_id);
        }
        Ok(updated)
    }

    /// `(have, need)` over the service bits of `want`.
    pub fn validate(&self, want: u32, now: UTime) -> (u32, u32) {
        let (mut have, mut need) = (0, 0);
        for bit in (0..32).map(|i| 1u32 << i).filter(|b| want & b != 0) {
            match self.tickets.get(&bit) {
                None => need |= bit,
                Some(h) => {
                    if h.need_key(now) {
                        need |= bit;
                    }
                    if h.have_key(now) {
                        have |= bit;
                    }
                }
            }
        }
        (have, need)
    }

    pub fn invalidate(&mut self, service_id: u32) {
        if let Some(h) = self.tickets.get_mut(&service_id) {
            h.have_key = false;
        }
    }
}

/// What a completed monitor authentication yields.
#[derive(Debug, Clone)]
pub struct MonSession {
    pub global_id: u64,
    /// The AUTH ticket's session key: keys msgr2's AUTH_SIGNATURE for this connection.
    pub session_key: CryptoKey,
    /// Secure-mode key material from the monitor (empty in crc mode).
    pub connection_secret: Bytes,
}

/// What a reply from the monitor was and whether more round trips are needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseKind {
    /// GET_AUTH_SESSION_KEY: tickets stored (services listed).
    SessionKey { services: Vec<u32> },
    /// GET_PRINCIPAL_SESSION_KEY: tickets stored.
    ServiceTickets { services: Vec<u32> },
    /// GET_ROTATING_KEY: rotating secrets stored.
    RotatingKeys,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the server challenge of a new connection.
    Starting,
    /// Sent CephXAuthenticate; waiting for the session key.
    Authenticating,
    /// Have an AUTH ticket.
    Authenticated,
}

/// A principal (client or daemon) talking cephx to the monitors.
#[derive(Clone)]
pub struct MonAuthClient {
    provider: Arc<dyn CryptoProvider>,
    name: EntityName,
    secret: CryptoKey,
    global_id: u64,
    /// Services we want tickets for; always includes AUTH.
    want: u32,
    phase: Phase,
    server_challenge: u64,
    tickets: TicketManager,
    rotating: Option<RotatingSecrets>,
}

impl std::fmt::Debug for MonAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonAuthClient")
            .field("name", &self.name)
            .field("global_id", &self.global_id)
            .field("want", &self.want)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

impl MonAuthClient {
    /// `want_keys`: the services to get tickets for (`ENTITY_TYPE_MON | ENTITY_TYPE_OSD | ...`).
    pub fn new(
        provider: Arc<dyn CryptoProvider>,
        name: EntityName,
        secret: CryptoKey,
        want_keys: u32,
    ) -> Self {
        MonAuthClient {
            provider,
            name,
            secret,
            global_id: 0,
            want: want_keys | ENTITY_TYPE_AUTH,
            phase: Phase::Starting,
            server_challenge: 0,
            tickets: TicketManager::default(),
            rotating: None,
        }
    }

    /// A copy for one more connection attempt (parallel hunting: each attempt runs its own handshake). It keeps
    /// the principal, its key, the global id and the tickets, so the attempt presents the previous AUTH ticket
    /// and reclaims the global id as Ceph's clients do; the handshake state starts over.
    pub fn fork(&self) -> MonAuthClient {
        MonAuthClient {
            phase: Phase::Starting,
            server_challenge: 0,
            ..self.clone()
        }
    }

    pub fn name(&self) -> &EntityName {
        &self.name
    }
    pub fn global_id(&self) -> u64 {
        self.global_id
    }
    pub fn provider(&self) -> &Arc<dyn CryptoProvider> {
        &self.provider
    }
    pub fn tickets(&self) -> &TicketManager {
        &self.tickets
    }
    pub fn is_authenticated(&self) -> bool {
        self.phase == Phase::Authenticated
    }
    /// Whether this principal is a daemon that must hold rotating service keys (OSD, MDS, MGR), as
    /// `auth_principal_needs_rotating_keys` decides.
    pub fn needs_rotating_keys(&self) -> bool {
        matches!(self.name.ty, ENTITY_TYPE_OSD | ENTITY_TYPE_MDS | ENTITY_TYPE_MGR)
    }

    /// Whether to (re)fetch rotating keys now: none yet, fewer than three (previous, current, next), or the
    /// current one expired more than 30 s ago (MonClient::_check_auth_rotating's cutoff with the default TTL).
    pub fn rotating_keys_due(&self, now: UTime) -> bool {
        if !self.needs_rotating_keys() {
            return false;
        }
        let Some(r) = &self.rotating else {
            return true;
        };
        let cutoff = utime_from_nanos(now.as_nanos().saturating_sub(30_000_000_000));
        r.secrets.len() < 3 || r.current().is_none_or(|(_, k)| k.expiration <= cutoff)
    }

    /// The cephx payloads to send to the monitor now (each in its own MAuth): rotating keys when due (daemons),
    /// then service tickets when due. Empty before authentication.
    pub fn due_requests(&self, now: UTime) -> Result<Vec<Bytes>, CephxError> {
        let mut out = Vec::new();
        if !self.is_authenticated() {
            return Ok(out);
        }
        if self.rotating_keys_due(now) {
            out.push(self.build_rotating_request());
        }
        if let Some(r) = self.build_ticket_request(now)? {
            out.push(r);
        }
        Ok(out)
    }

    /// The keys a daemon needs to verify authorizers for its own service (its rotating secrets and its own key).
    pub fn service_keys(&self) -> Option<crate::service::ServiceKeys> {
        let rotating = self.rotating.clone()?;
        Some(crate::service::ServiceKeys {
            service_id: self.name.ty,
            rotating,
            own: Some((self.name.clone(), self.secret.clone())),
        })
    }

    /// The rotating secrets fetched with CEPHX_GET_ROTATING_KEY (daemons only).
    pub fn rotating_secrets(&self) -> Option<&RotatingSecrets> {
        self.rotating.as_ref()
    }

    /// The first AUTH_REQUEST payload of a new monitor connection: `u8 AUTH_MODE_MON, EntityName, u64 global_id`
    /// (cephx adds nothing more). Resets the per-connection state; tickets are kept, so a reconnect presents the
    /// previous AUTH ticket (global_id reclaim).
    pub fn initial_request(&mut self) -> Bytes {
        self.phase = Phase::Starting;
        self.server_challenge = 0;
        let mut e = Encoder::default();
        e.u8(AUTH_MODE_MON);
        self.name.encode(&mut e);
        e.u64(self.global_id);
        e.into_bytes()
    }

    /// The monitor's CephXServerChallenge: answer with CephXAuthenticate (the AUTH_REQUEST_MORE payload).
    pub fn handle_reply_more(&mut self, payload: &[u8]) -> Result<Bytes, CephxError> {
        if self.phase != Phase::Starting {
            return Err(CephxError::Protocol(
                "unexpected AUTH_REPLY_MORE after the challenge".into(),
            ));
        }
        let ch = CephXServerChallenge::decode(&mut Decoder::new(Bytes::copy_from_slice(payload)))?;
        self.server_challenge = ch.server_challenge;
        self.tickets.invalidate(ENTITY_TYPE_AUTH);
        let req = self.build_authenticate()?;
        self.phase = Phase::Authenticating;
        Ok(req)
    }

    fn build_authenticate(&self) -> Result<Bytes, CephxError> {
        let client_challenge = self.provider.random_u64();
        let key = calc_client_server_challenge(
            &*self.provider,
            &self.secret,
            self.server_challenge,
            client_challenge,
        )?;
        let old_ticket = self
            .tickets
            .tickets
            .get(&ENTITY_TYPE_AUTH)
            .map(|h| h.ticket.clone())
            .unwrap_or_default();
        let mut e = Encoder::default();
        CephXRequestHeader {
            request_type: CEPHX_GET_AUTH_SESSION_KEY,
        }
        .encode(&mut e);
        CephXAuthenticate {
            struct_v: 3,
            client_challenge,
            key,
            old_ticket,
            // Everything we want but lack, in the same round trip (Nautilus+ monitors honour it).
            other_keys: self.want,
        }
        .encode(&mut e);
        Ok(e.into_bytes())
    }

    /// AUTH_DONE from the monitor: store the tickets, decrypt the connection secret.
    pub fn handle_done(
        &mut self,
        global_id: u64,
        payload: &[u8],
        now: UTime,
    ) -> Result<MonSession, CephxError> {
        if self.phase != Phase::Authenticating {
            return Err(CephxError::Protocol(
                "AUTH_DONE before the challenge round".into(),
            ));
        }
        self.global_id = global_id;
        let mut d = Decoder::new(Bytes::copy_from_slice(payload));
        let header = CephXResponseHeader::decode(&mut d)?;
        if header.request_type != CEPHX_GET_AUTH_SESSION_KEY {
            return Err(CephxError::Protocol(format!(
                "AUTH_DONE carries response type {:#x}",
                header.request_type
            )));
        }
        if header.status < 0 {
            return Err(CephxError::Rejected { errno: header.status });
        }
        let connection_secret = self.handle_session_key_reply(&mut d, now)?;
        let session_key = self.auth_session_key()?;
        self.phase = Phase::Authenticated;
        Ok(MonSession {
            global_id,
            session_key,
            connection_secret,
        })
    }

    /// The AUTH ticket's session key (what the monitor seals everything after the first reply with).
    fn auth_session_key(&self) -> Result<CryptoKey, CephxError> {
        self.tickets
            .tickets
            .get(&ENTITY_TYPE_AUTH)
            .map(|h| h.session_key.clone())
            .ok_or(CephxError::NoTicket(ENTITY_TYPE_AUTH))
    }

    /// The body after a GET_AUTH_SESSION_KEY response header: tickets sealed with our key, then (msgr2 monitors)
    /// `bl cbl` = {connection secret}session_key and `bl extra_tickets` sealed with the new session key.
    fn handle_session_key_reply(&mut self, d: &mut Decoder, now: UTime) -> Result<Bytes, CephxError> {
        let secret = self.secret.clone();
        self.tickets
            .verify_service_ticket_reply(&*self.provider, &secret, d, now)
            .map_err(|e| match e {
                // A ticket we cannot open means the key is wrong: Ceph reports EPERM here.
                CephxError::Decrypt(_) | CephxError::BadMagic(_) => CephxError::Rejected { errno: -EPERM_I },
                e => e,
            })?;
        let mut connection_secret = Bytes::new();
        if !d.is_empty() {
            let cbl = d.bufferlist()?;
            let extra = d.bufferlist()?;
            let session_key = self.auth_session_key()?;
            if !cbl.is_empty() {
                connection_secret =
                    decode_decrypt::<Bytes>(&*self.provider, &session_key, &mut Decoder::new(cbl))?;
            }
            if !extra.is_empty() {
                self.tickets.verify_service_ticket_reply(
                    &*self.provider,
                    &session_key,
                    &mut Decoder::new(extra),
                    now,
                )?;
            }
        }
        Ok(connection_secret)
    }

    /// `(have, need)` service bits against what we want.
    pub fn validate_tickets(&self, now: UTime) -> (u32, u32) {
        self.tickets.validate(self.want, now)
    }

    /// Services still needing a ticket. As Ceph does, a missing MGR ticket alone does not trigger a request.
    pub fn need_tickets(&self, now: UTime) -> u32 {
        let (_, need) = self.validate_tickets(now);
        if need == ENTITY_TYPE_MGR { 0 } else { need }
    }

    /// The MAuth payload for CEPHX_GET_PRINCIPAL_SESSION_KEY: header, an authorizer for the AUTH service, and
    /// CephXServiceTicketRequest for the services we need. `None` when nothing is needed.
    pub fn build_ticket_request(&self, now: UTime) -> Result<Option<Bytes>, CephxError> {
        let need = self.need_tickets(now);
        if need == 0 {
            return Ok(None);
        }
        let mut e = Encoder::default();
        CephXRequestHeader {
            request_type: CEPHX_GET_PRINCIPAL_SESSION_KEY,
        }
        .encode(&mut e);
        let authorizer = self.build_authorizer(ENTITY_TYPE_AUTH)?;
        e.raw(authorizer.payload());
        CephXServiceTicketRequest { keys: need }.encode(&mut e);
        Ok(Some(e.into_bytes()))
    }

    /// The MAuth payload for CEPHX_GET_ROTATING_KEY (just the header).
    pub fn build_rotating_request(&self) -> Bytes {
        CephXRequestHeader {
            request_type: CEPHX_GET_ROTATING_KEY,
        }
        .to_bytes(0)
    }

    /// An MAuthReply's `result` and payload (`result_bl`).
    pub fn handle_response(
        &mut self,
        result: i32,
        payload: &[u8],
        now: UTime,
    ) -> Result<ResponseKind, CephxError> {
        if result < 0 {
            return Err(CephxError::Rejected { errno: result });
        }
        let mut d = Decoder::new(Bytes::copy_from_slice(payload));
        let header = CephXResponseHeader::decode(&mut d)?;
        if header.status < 0 {
            return Err(CephxError::Rejected { errno: header.status });
        }
        match header.request_type {
            CEPHX_GET_AUTH_SESSION_KEY => {
                self.handle_session_key_reply(&mut d, now)?;
                self.phase = Phase::Authenticated;
                Ok(ResponseKind::SessionKey {
                    services: self.tickets.tickets.keys().copied().collect(),
                })
            }
            CEPHX_GET_PRINCIPAL_SESSION_KEY => {
                let key = self.auth_session_key()?;
                let services =
                    self.tickets
                        .verify_service_ticket_reply(&*self.provider, &key, &mut d, now)?;
                Ok(ResponseKind::ServiceTickets { services })
            }
            CEPHX_GET_ROTATING_KEY => {
                let secrets: RotatingSecrets = decode_decrypt(&*self.provider, &self.secret, &mut d)?;
                self.rotating = Some(secrets);
                Ok(ResponseKind::RotatingKeys)
            }
            t => Err(CephxError::Protocol(format!(
                "unknown cephx response type {t:#x}"
            ))),
        }
    }

    /// An authorizer for a connection to `service_id` (OSD, MGR, or AUTH for ticket requests).
    pub fn build_authorizer(&self, service_id: u32) -> Result<Authorizer, CephxError> {
        let h = self
            .tickets
            .tickets
            .get(&service_id)
            .filter(|h| h.have_key)
            .ok_or(CephxError::NoTicket(service_id))?;
        Authorizer::build(
            self.provider.clone(),
            self.global_id,
            service_id,
            &h.ticket,
            h.session_key.clone(),
        )
    }
}

const EPERM_I: i32 = crate::error::EPERM;

/// An authorizer (`CephXAuthorizer`): `u8 1, u64 global_id, u32 service_id, CephXTicketBlob` followed by
/// {CephXAuthorize}session_key. With msgr2 the service always challenges first (CEPHX_V2); the answer repeats the
/// authorizer with `server_challenge + 1`, and the final reply proves the service could open the ticket.
pub struct Authorizer {
    provider: Arc<dyn CryptoProvider>,
    pub service_id: u32,
    pub session_key: CryptoKey,
    nonce: u64,
    base: Bytes,
    payload: Bytes,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("service_id", &self.service_id)
            .field("len", &self.payload.len())
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    pub fn build(
        provider: Arc<dyn CryptoProvider>,
        global_id: u64,
        service_id: u32,
        ticket: &CephXTicketBlob,
        session_key: CryptoKey,
    ) -> Result<Self, CephxError> {
        let nonce = provider.random_u64();
        let mut e = Encoder::default();
        e.u8(AUTH_MODE_AUTHORIZER);
        e.u64(global_id);
        e.u32(service_id);
        ticket.encode(&mut e);
        let base = e.into_bytes();
        let mut a = Authorizer {
            provider,
            service_id,
            session_key,
            nonce,
            base,
            payload: Bytes::new(),
        };
        a.payload = a.seal(CephXAuthorize {
            nonce,
            have_challenge: false,
            server_challenge_plus_one: 0,
        })?;
        Ok(a)
    }

    fn seal(&self, msg: CephXAuthorize) -> Result<Bytes, CephxError> {
        let mut e = Encoder::default();
        e.raw(&self.base);
        encode_encrypt(&*self.provider, &self.session_key, &msg, &mut e)?;
        Ok(e.into_bytes())
    }

    /// The AUTH_REQUEST payload (and, after [`Authorizer::add_challenge`], the AUTH_REQUEST_MORE payload).
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    pub fn nonce(&self) -> u64 {
        self.nonce
    }

    /// The service's AUTH_REPLY_MORE: {CephXAuthorizeChallenge}session_key without a length prefix. Returns the
    /// new payload (same nonce, `have_challenge`, challenge + 1).
    pub fn add_challenge(&mut self, challenge: &[u8]) -> Result<Bytes, CephxError> {
        let mut msg = CephXAuthorize {
            nonce: self.nonce,
            have_challenge: false,
            server_challenge_plus_one: 0,
        };
        if !challenge.is_empty() {
            let ch: CephXAuthorizeChallenge = decrypt_enc_bl(&*self.provider, &self.session_key, challenge)?;
            msg.have_challenge = true;
            msg.server_challenge_plus_one = ch.server_challenge.wrapping_add(1);
        }
        self.payload = self.seal(msg)?;
        Ok(self.payload.clone())
    }

    /// The service's AUTH_DONE payload: {CephXAuthorizeReply}session_key with a length prefix. Checks nonce + 1
    /// and returns the connection secret (empty in crc mode).
    pub fn verify_reply(&self, reply: &[u8]) -> Result<Bytes, CephxError> {
        let r: CephXAuthorizeReply = decode_decrypt(
            &*self.provider,
            &self.session_key,
            &mut Decoder::new(Bytes::copy_from_slice(reply)),
        )?;
        let expected = self.nonce.wrapping_add(1);
        if r.nonce_plus_one != expected {
            return Err(CephxError::NonceMismatch {
                expected,
                got: r.nonce_plus_one,
            });
        }
        Ok(r.connection_secret)
    }
}
