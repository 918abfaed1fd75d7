// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every cephx type against Ceph's object corpus: all samples decode; 16.2 samples re-encode byte-identically.

use ceph_corpus::{Check, PACIFIC_FEATURES, check_type};
use cephx::*;

macro_rules! corpus {
    ($($test:ident: $ty:ty => $name:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            let s = check_type::<$ty>($name, PACIFIC_FEATURES);
            if !s.skipped {
                let t = s.total();
                assert!(t.samples > 0, "no samples of {}", $name);
                assert_eq!(t.decoded + t.refused, t.samples);
            }
        }
    )*};
}

corpus! {
    cephx_authenticate: CephXAuthenticate => "CephXAuthenticate",
    cephx_authorize: CephXAuthorize => "CephXAuthorize",
    cephx_authorize_challenge: CephXAuthorizeChallenge => "CephXAuthorizeChallenge",
    cephx_authorize_reply: CephXAuthorizeReply => "CephXAuthorizeReply",
    cephx_challenge_blob: CephXChallengeBlob => "CephXChallengeBlob",
    cephx_request_header: CephXRequestHeader => "CephXRequestHeader",
    cephx_response_header: CephXResponseHeader => "CephXResponseHeader",
    cephx_server_challenge: CephXServerChallenge => "CephXServerChallenge",
    cephx_service_ticket: CephXServiceTicket => "CephXServiceTicket",
    cephx_service_ticket_info: CephXServiceTicketInfo => "CephXServiceTicketInfo",
    cephx_service_ticket_request: CephXServiceTicketRequest => "CephXServiceTicketRequest",
    cephx_ticket_blob: CephXTicketBlob => "CephXTicketBlob",
    auth_ticket: AuthTicket => "AuthTicket",
    auth_caps_info: AuthCapsInfo => "AuthCapsInfo",
    crypto_key: CryptoKey => "CryptoKey",
    expiring_crypto_key: ExpiringCryptoKey => "ExpiringCryptoKey",
    entity_auth: EntityAuth => "EntityAuth",
    rotating_secrets: RotatingSecrets => "RotatingSecrets",
}

#[test]
fn check_builder_is_usable() {
    // Sanity: the builder form works for a type with trailing data forbidden (the default).
    let _ = Check::new("CephXServerChallenge").run::<CephXServerChallenge>();
}
