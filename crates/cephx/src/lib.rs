// SPDX-License-Identifier: LGPL-3.0-or-later
//! cephx, Ceph's shared-secret authentication, wire-compatible with Ceph 16.2 and sans-IO.
//!
//! * [`crypto`]: AES-128-CBC with Ceph's fixed IV, HMAC-SHA256 and randomness behind [`CryptoProvider`];
//!   [`CryptoKey`] (keyring keys) and the encrypted-blob envelope.
//! * [`types`]: every cephx wire struct.
//! * [`client`]: a principal authenticating to the monitors and holding tickets; [`client::Authorizer`] for
//!   connections to OSDs and mgrs (CEPHX_V2 challenge, connection secret).
//! * [`service`]: a daemon verifying authorizers with its rotating service secrets.
//! * [`msgr2_auth`]: all of the above behind msgr2's `ClientAuth` / `ServerAuth` seam.
//!
//! Nothing here touches sockets, clocks or files: times come in as arguments and randomness from the provider.

pub mod base64;
pub mod client;
pub mod crypto;
pub mod error;
pub mod msgr2_auth;
pub mod service;
pub mod types;

pub use client::{Authorizer, MonAuthClient};
pub use crypto::{AwsLcProvider, CryptoKey, CryptoProvider};
pub use error::CephxError;
pub use service::{PeerAuth, ServiceAuthorizerVerifier, ServiceKeys};
pub use types::*;

#[cfg(test)]
pub(crate) mod tests {
    pub fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
