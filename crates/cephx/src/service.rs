// SPDX-License-Identifier: LGPL-3.0-or-later
//! The service side of cephx, sans-IO.
//!
//! * [`ServiceAuthorizerVerifier`]: a daemon (OSD, mgr) checks the authorizer a client or peer presents: it opens
//!   the ticket with its rotating service secret (by secret id), opens CephXAuthorize with the ticket's session
//!   key, challenges (CEPHX_V2, always with msgr2), checks `challenge + 1`, and answers with nonce + 1 and a fresh
//!   connection secret. The peer's name, global id and caps come out of the ticket.
//! * [`MonAuthServer`]: the monitor's half (`CephxServiceHandler`), enough to issue real tickets to real clients
//!   in tests and simulations: challenge, key proof, session key, service tickets, rotating keys.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use denc::{Decode, Decoder, Encode, Encoder};

use crate::client::calc_client_server_challenge;
use crate::crypto::{
    CryptoKey, CryptoProvider, decode_decrypt, decrypt_enc_bl, encode_encrypt, encrypt_enc_bl,
};
use crate::error::{CephxError, EACCES, EINVAL};
use crate::types::*;

/// Where a service finds the keys that open tickets (`KeyStore`).
pub trait KeyStore {
    /// The secret with `secret_id` for `service_id` (rotating keys).
    fn get_service_secret(&self, service_id: u32, secret_id: u64) -> Option<CryptoKey>;
    /// An entity's own key (tickets with secret id -1 are sealed with the service's own entity key).
    fn get_secret(&self, name: &EntityName) -> Option<CryptoKey>;
}

/// A daemon's keys: its rotating secrets for its own service type (from CEPHX_GET_ROTATING_KEY) and optionally
/// its own entity key.
#[derive(Debug, Clone, Default)]
pub struct ServiceKeys {
    pub service_id: u32,
    pub rotating: RotatingSecrets,
    pub own: Option<(EntityName, CryptoKey)>,
}

impl KeyStore for ServiceKeys {
    fn get_service_secret(&self, service_id: u32, secret_id: u64) -> Option<CryptoKey> {
        if service_id != self.service_id {
            return None;
        }
        self.rotating.get(secret_id).map(|k| k.key.clone())
    }
    fn get_secret(&self, name: &EntityName) -> Option<CryptoKey> {
        self.own
            .as_ref()
            .filter(|(n, _)| n == name)
            .map(|(_, k)| k.clone())
    }
}

/// Who an authorizer proved the peer to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAuth {
    pub name: EntityName,
    pub global_id: u64,
    /// The caps for this service; [`AuthCapsInfo::caps_text`] gives the string an OSD parses.
    pub caps: AuthCapsInfo,
    pub session_key: CryptoKey,
    pub ticket_expires: UTime,
}

/// The verifier's answer.
#[derive(Debug, Clone)]
pub enum ServiceStep {
    /// Send this as AUTH_REPLY_MORE (the encrypted challenge) and wait for the repeated authorizer.
    Challenge(Bytes),
    /// Send `reply` as AUTH_DONE; the peer is authenticated.
    Done {
        reply: Bytes,
        peer: PeerAuth,
        connection_secret: Bytes,
    },
}

/// Per-connection authorizer verification (holds the outstanding challenge between the two rounds).
pub struct ServiceAuthorizerVerifier {
    provider: Arc<dyn CryptoProvider>,
    challenge: Option<u64>,
}

impl ServiceAuthorizerVerifier {
    pub fn new(provider: Arc<dyn CryptoProvider>) -> Self {
        ServiceAuthorizerVerifier {
            provider,
            challenge: None,
        }
    }

    /// Verify an authorizer payload (AUTH_REQUEST or AUTH_REQUEST_MORE). `connection_secret_len` is 64 for msgr2
    /// secure mode and 0 for crc mode, as Ceph sizes it.
    pub fn verify(
        &mut self,
        keys: &dyn KeyStore,
        payload: &[u8],
        connection_secret_len: usize,
    ) -> Result<ServiceStep, CephxError> {
        let p = &*self.provider;
        let mut d = Decoder::new(Bytes::copy_from_slice(payload));
        let _authorizer_v = d.u8()?;
        let global_id = d.u64()?;
        let service_id = d.u32()?;
        let ticket = CephXTicketBlob::decode(&mut d)?;
        if ticket.blob.is_empty() {
            return Err(CephxError::Protocol("empty ticket".into()));
        }
        let service_secret = if ticket.secret_id == u64::MAX {
            keys.get_secret(&entity_name(service_id, ""))
        } else {
            keys.get_service_secret(service_id, ticket.secret_id)
        }
        .ok_or(CephxError::UnknownSecret {
            service_id,
            secret_id: ticket.secret_id,
        })?;
        let info: CephXServiceTicketInfo = decrypt_enc_bl(p, &service_secret, &ticket.blob)?;
        if info.ticket.global_id != global_id {
            return Err(CephxError::GlobalIdMismatch {
                declared: global_id,
                ticket: info.ticket.global_id,
            });
        }
        let auth: CephXAuthorize = decode_decrypt(p, &info.session_key, &mut d)?;
        match self.challenge {
            Some(c) if auth.have_challenge => {
                if auth.server_challenge_plus_one != c.wrapping_add(1) {
                    return Err(CephxError::ChallengeMismatch);
                }
            }
            _ => {
                let c = p.random_u64();
                self.challenge = Some(c);
                let sealed = encrypt_enc_bl(
                    p,
                    &info.session_key,
                    &CephXAuthorizeChallenge { server_challenge: c },
                )?;
                return Ok(ServiceStep::Challenge(sealed));
            }
        }
        let mut secret = vec![0u8; connection_secret_len];
        p.fill_random(&mut secret);
        let connection_secret = Bytes::from(secret);
        let mut e = Encoder::default();
        encode_encrypt(
            p,
            &info.session_key,
            &CephXAuthorizeReply {
                nonce_plus_one: auth.nonce.wrapping_add(1),
                connection_secret: connection_secret.clone(),
            },
            &mut e,
        )?;
        Ok(ServiceStep::Done {
            reply: e.into_bytes(),
            peer: PeerAuth {
                name: info.ticket.name,
                global_id,
                caps: info.ticket.caps,
                session_key: info.session_key,
                ticket_expires: info.ticket.expires,
            },
            connection_secret,
        })
    }
}

/// One ticket to issue (`CephXSessionAuthInfo`).
#[derive(Debug, Clone)]
pub struct SessionAuthInfo {
    pub service_id: u32,
    pub secret_id: u64,
    pub ticket: AuthTicket,
    pub session_key: CryptoKey,
    pub service_secret: CryptoKey,
    pub validity: UTime,
}

/// `cephx_build_service_ticket_reply`: `u8 1, u32 n` then per ticket `u32 service, u8 1,
/// {CephXServiceTicket}principal_secret, u8 enc, ticket` where the ticket (an encoded CephXTicketBlob holding
/// {CephXServiceTicketInfo}service_secret) is sealed with `ticket_enc_key` when given, else sent as a bufferlist.
pub fn build_service_ticket_reply(
    provider: &dyn CryptoProvider,
    principal_secret: &CryptoKey,
    infos: &[SessionAuthInfo],
    ticket_enc_key: Option<&CryptoKey>,
    out: &mut Encoder,
) -> Result<(), CephxError> {
    out.u8(1);
    out.length(infos.len());
    for info in infos {
        out.u32(info.service_id);
        out.u8(1);
        encode_encrypt(
            provider,
            principal_secret,
            &CephXServiceTicket {
                session_key: info.session_key.clone(),
                validity: info.validity,
            },
            out,
        )?;
        let blob = CephXTicketBlob {
            secret_id: info.secret_id,
            blob: encrypt_enc_bl(
                provider,
                &info.service_secret,
                &CephXServiceTicketInfo {
                    ticket: info.ticket.clone(),
                    session_key: info.session_key.clone(),
                },
            )?,
        };
        let blob_bl = blob.to_bytes(0);
        match ticket_enc_key {
            Some(k) => {
                out.u8(1);
                encode_encrypt(provider, k, &blob_bl, out)?;
            }
            None => {
                out.u8(0);
                out.bytes(&blob_bl);
            }
        }
    }
    Ok(())
}

/// One principal in the monitor's auth database.
#[derive(Debug, Clone)]
pub struct AuthEntry {
    pub key: CryptoKey,
    /// Caps by service name (`mon`, `osd`, `mgr`, `mds`).
    pub caps: BTreeMap<String, String>,
}

/// A monitor's cephx service (KeyServer + CephxServiceHandler), sans-IO, for tests and simulations. It issues
/// tickets that real Ceph daemons accept, given the same service secrets.
pub struct MonAuthServer {
    provider: Arc<dyn CryptoProvider>,
    pub entities: BTreeMap<EntityName, AuthEntry>,
    /// Rotating secrets per service id.
    pub rotating: BTreeMap<u32, RotatingSecrets>,
    /// Ticket lifetimes: the AUTH ticket and service tickets.
    pub auth_ticket_ttl: UTime,
    pub service_ticket_ttl: UTime,
    next_global_id: u64,
}

/// The state of one connection to [`MonAuthServer`].
#[derive(Debug, Clone, Default)]
pub struct MonAuthConnection {
    name: Option<EntityName>,
    global_id: u64,
    server_challenge: Option<u64>,
    /// After authentication: the AUTH ticket's session key (for later MAuth requests).
    pub session_key: Option<CryptoKey>,
    /// After authentication: the connection secret sent in the reply (empty in crc mode).
    pub connection_secret: Bytes,
}

impl MonAuthConnection {
    /// The authenticated principal, once known.
    pub fn name(&self) -> Option<&EntityName> {
        self.name.as_ref()
    }
}

impl MonAuthServer {
    pub fn new(provider: Arc<dyn CryptoProvider>) -> Self {
        MonAuthServer {
            provider,
            entities: BTreeMap::new(),
            rotating: BTreeMap::new(),
            auth_ticket_ttl: UTime::new(259_200, 0),
            service_ticket_ttl: UTime::new(3600, 0),
            next_global_id: 4100,
        }
    }

    /// Create three rotating secrets for a service, as a monitor does at start.
    pub fn add_rotating(&mut self, service_id: u32, now: UTime) {
        let mut r = RotatingSecrets::default();
        for i in 0..3u32 {
            r.max_ver += 1;
            r.secrets.insert(
                r.max_ver,
                ExpiringCryptoKey {
                    key: CryptoKey::generate(&*self.provider, now),
                    expiration: utime_add(now, UTime::new(3600 * (i + 1), 0)),
                },
            );
        }
        self.rotating.insert(service_id, r);
    }

    /// AUTH_REQUEST from a principal: returns the AUTH_REPLY_MORE payload (CephXServerChallenge).
    pub fn handle_initial(
        &mut self,
        conn: &mut MonAuthConnection,
        payload: &[u8],
    ) -> Result<Bytes, CephxError> {
        let mut d = Decoder::new(Bytes::copy_from_slice(payload));
        let mode = d.u8()?;
        if mode != AUTH_MODE_MON {
            return Err(CephxError::Protocol(format!("auth mode {mode}")));
        }
        let name = EntityName::decode(&mut d)?;
        conn.global_id = d.u64()?;
        conn.name = Some(name);
        let c = self.provider.random_u64();
        conn.server_challenge = Some(c);
        Ok(CephXServerChallenge { server_challenge: c }.to_bytes(0))
    }

    fn ticket_for(&self, name: &EntityName, global_id: u64, service: u32, now: UTime) -> AuthTicket {
        let caps = self
            .entities
            .get(name)
            .and_then(|e| entity_type_name(service).and_then(|s| e.caps.get(s)))
            .map(|c| AuthCapsInfo::from_text(c))
            .unwrap_or_default();
        let ttl = if service == ENTITY_TYPE_AUTH {
            self.auth_ticket_ttl
        } else {
            self.service_ticket_ttl
        };
        AuthTicket {
            name: name.clone(),
            global_id,
            created: now,
            expires: utime_add(now, ttl),
            caps,
            flags: 0,
        }
    }

    fn service_info(
        &self,
        name: &EntityName,
        global_id: u64,
        service_id: u32,
        now: UTime,
    ) -> Option<SessionAuthInfo> {
        let (secret_id, service_secret) = self
            .rotating
            .get(&service_id)
            .and_then(|r| r.current().map(|(id, k)| (id, k.key.clone())))?;
        Some(SessionAuthInfo {
            service_id,
            secret_id,
            ticket: self.ticket_for(name, global_id, service_id, now),
            session_key: CryptoKey::generate(&*self.provider, now),
            service_secret,
            validity: self.service_ticket_ttl,
        })
    }

    /// AUTH_REQUEST_MORE (CephXAuthenticate): returns `(global_id, AUTH_DONE payload)` or the errno to put in
    /// AUTH_BAD_METHOD (`-EACCES` for a wrong key, as Ceph's monitor answers).
    pub fn handle_authenticate(
        &mut self,
        conn: &mut MonAuthConnection,
        payload: &[u8],
        connection_secret_len: usize,
        now: UTime,
    ) -> Result<(u64, Bytes), i32> {
        let p = self.provider.clone();
        let name = conn.name.clone().ok_or(-EINVAL)?;
        let entry = self.entities.get(&name).cloned().ok_or(-EACCES)?;
        let mut d = Decoder::new(Bytes::copy_from_slice(payload));
        let header = CephXRequestHeader::decode(&mut d).map_err(|_| -EINVAL)?;
        if header.request_type != CEPHX_GET_AUTH_SESSION_KEY {
            return Err(-EINVAL);
        }
        let req = CephXAuthenticate::decode(&mut d).map_err(|_| -EINVAL)?;
        let sc = conn.server_challenge.take().ok_or(-EINVAL)?;
        let expected =
            calc_client_server_challenge(&*p, &entry.key, sc, req.client_challenge).map_err(|_| -EACCES)?;
        if expected != req.key {
            return Err(-EACCES);
        }
        let global_id = if conn.global_id != 0 {
            conn.global_id
        } else {
            self.next_global_id += 1;
            self.next_global_id
        };
        let session_key = CryptoKey::generate(&*p, now);
        let auth_secret = CryptoKey::generate(&*p, now);
        let info = SessionAuthInfo {
            service_id: ENTITY_TYPE_AUTH,
            secret_id: u64::MAX,
            ticket: self.ticket_for(&name, global_id, ENTITY_TYPE_AUTH, now),
            session_key: session_key.clone(),
            service_secret: auth_secret,
            validity: self.auth_ticket_ttl,
        };
        let fail = |_| -EINVAL;
        let mut e = Encoder::default();
        CephXResponseHeader {
            request_type: CEPHX_GET_AUTH_SESSION_KEY,
            status: 0,
        }
        .encode(&mut e);
        build_service_ticket_reply(&*p, &entry.key, &[info], None, &mut e).map_err(fail)?;
        let mut secret = vec![0u8; connection_secret_len];
        p.fill_random(&mut secret);
        let secret = Bytes::from(secret);
        let mut cbl = Encoder::default();
        encode_encrypt(&*p, &session_key, &secret, &mut cbl).map_err(fail)?;
        conn.connection_secret = secret;
        e.bytes(cbl.as_slice());
        let extra: Vec<SessionAuthInfo> = (0..32)
            .map(|i| 1u32 << i)
            .filter(|b| req.other_keys & b != 0 && *b != ENTITY_TYPE_AUTH)
            .filter_map(|s| self.service_info(&name, global_id, s, now))
            .collect();
        let mut extra_bl = Encoder::default();
        if !extra.is_empty() {
            build_service_ticket_reply(&*p, &session_key, &extra, None, &mut extra_bl).map_err(fail)?;
        }
        e.bytes(extra_bl.as_slice());
        conn.global_id = global_id;
        conn.session_key = Some(session_key);
        Ok((global_id, e.into_bytes()))
    }

    /// A later MAuth request on an authenticated connection (service tickets or rotating keys): the MAuthReply
    /// payload.
    pub fn handle_request(
        &mut self,
        conn: &MonAuthConnection,
        payload: &[u8],
        now: UTime,
    ) -> Result<Bytes, CephxError> {
        let p = self.provider.clone();
        let name = conn
            .name
            .clone()
            .ok_or_else(|| CephxError::Protocol("not authenticated".into()))?;
        let mut d = Decoder::new(Bytes::copy_from_slice(payload));
        let header = CephXRequestHeader::decode(&mut d)?;
        let mut e = Encoder::default();
        CephXResponseHeader {
            request_type: header.request_type,
            status: 0,
        }
        .encode(&mut e);
        match header.request_type {
            CEPHX_GET_PRINCIPAL_SESSION_KEY => {
                // The authorizer for the AUTH service: opened with the session key we handed out.
                let _v = d.u8()?;
                let _gid = d.u64()?;
                let _service = d.u32()?;
                let _ticket = CephXTicketBlob::decode(&mut d)?;
                let session_key = conn
                    .session_key
                    .clone()
                    .ok_or_else(|| CephxError::Protocol("no session".into()))?;
                let _auth: CephXAuthorize = decode_decrypt(&*p, &session_key, &mut d)?;
                let req = CephXServiceTicketRequest::decode(&mut d)?;
                let infos: Vec<SessionAuthInfo> = (0..32)
                    .map(|i| 1u32 << i)
                    .filter(|b| req.keys & b != 0 && *b != ENTITY_TYPE_AUTH)
                    .filter_map(|s| self.service_info(&name, conn.global_id, s, now))
                    .collect();
                build_service_ticket_reply(&*p, &session_key, &infos, None, &mut e)?;
            }
            CEPHX_GET_ROTATING_KEY => {
                let entry = self
                    .entities
                    .get(&name)
                    .ok_or(CephxError::Rejected { errno: -EACCES })?;
                let secrets = self
                    .rotating
                    .get(&name.ty)
                    .cloned()
                    .ok_or(CephxError::Rejected { errno: -EACCES })?;
                encode_encrypt(&*p, &entry.key, &secrets, &mut e)?;
            }
            t => return Err(CephxError::Protocol(format!("request type {t:#x}"))),
        }
        Ok(e.into_bytes())
    }
}
