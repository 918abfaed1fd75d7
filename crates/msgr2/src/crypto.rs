// SPDX-License-Identifier: LGPL-3.0-or-later
//! The crypto seam. msgr2 needs exactly two primitives: AES-128-GCM (secure mode) and HMAC-SHA256
//! (AUTH_SIGNATURE). They sit behind [`CryptoProvider`], as rustls does it, so the default aws-lc-rs provider can be
//! swapped for a pure-Rust one or a test double.

use std::sync::Arc;

/// AES-128-GCM nonce length (`le32 fixed` + `le64 counter`).
pub const NONCE_LEN: usize = 12;
/// AES-128 key length.
pub const KEY_LEN: usize = 16;
/// GCM authentication tag length.
pub const TAG_LEN: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    #[error("AES-GCM authentication failed (wrong key, nonce out of step, or tampered frame)")]
    BadTag,
    #[error("crypto provider failure: {0}")]
    Provider(&'static str),
}

/// An AES-128-GCM key ready for use. No associated data is used by msgr2.
pub trait AeadKey: Send + Sync {
    /// Encrypt `data` in place and return the tag.
    fn seal_in_place(&self, nonce: &[u8; NONCE_LEN], data: &mut [u8]) -> Result<[u8; TAG_LEN], CryptoError>;
    /// Check and decrypt `in_out` = ciphertext ‖ tag in place; the plaintext is `in_out[..len - TAG_LEN]`.
    fn open_in_place(&self, nonce: &[u8; NONCE_LEN], in_out: &mut [u8]) -> Result<(), CryptoError>;
}

/// The primitives msgr2 needs.
pub trait CryptoProvider: Send + Sync + std::fmt::Debug {
    fn aes128_gcm(&self, key: &[u8; KEY_LEN]) -> Result<Box<dyn AeadKey>, CryptoError>;
    /// HMAC-SHA256 over the concatenation of `parts`.
    fn hmac_sha256(&self, key: &[u8], parts: &[&[u8]]) -> [u8; 32];
}

/// The default provider (aws-lc-rs when the `aws-lc` feature is on).
pub fn default_provider() -> Arc<dyn CryptoProvider> {
    #[cfg(feature = "aws-lc")]
    {
        Arc::new(AwsLc)
    }
    #[cfg(not(feature = "aws-lc"))]
    {
        Arc::new(NoCrypto)
    }
}

/// A provider with no crypto: crc mode with auth none only. Secure mode and non-empty session keys fail.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCrypto;

impl CryptoProvider for NoCrypto {
    fn aes128_gcm(&self, _key: &[u8; KEY_LEN]) -> Result<Box<dyn AeadKey>, CryptoError> {
        Err(CryptoError::Provider("no crypto provider compiled in"))
    }
    fn hmac_sha256(&self, _key: &[u8], _parts: &[&[u8]]) -> [u8; 32] {
        [0; 32]
    }
}

/// AES-128-GCM and HMAC-SHA256 from aws-lc-rs.
#[cfg(feature = "aws-lc")]
#[derive(Debug, Clone, Copy, Default)]
pub struct AwsLc;

#[cfg(feature = "aws-lc")]
struct AwsLcGcm(aws_lc_rs::aead::LessSafeKey);

#[cfg(feature = "aws-lc")]
impl AeadKey for AwsLcGcm {
    fn seal_in_place(&self, nonce: &[u8; NONCE_LEN], data: &mut [u8]) -> Result<[u8; TAG_LEN], CryptoError> {
        use aws_lc_rs::aead::{Aad, Nonce};
        let tag = self
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(*nonce), Aad::empty(), data)
            .map_err(|_| CryptoError::Provider("AES-GCM seal failed"))?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    fn open_in_place(&self, nonce: &[u8; NONCE_LEN], in_out: &mut [u8]) -> Result<(), CryptoError> {
        use aws_lc_rs::aead::{Aad, Nonce};
        self.0
            .open_in_place(Nonce::assume_unique_for_key(*nonce), Aad::empty(), in_out)
            .map_err(|_| CryptoError::BadTag)?;
        Ok(())
    }
}

#[cfg(feature = "aws-lc")]
impl CryptoProvider for AwsLc {
    fn aes128_gcm(&self, key: &[u8; KEY_LEN]) -> Result<Box<dyn AeadKey>, CryptoError> {
        let unbound = aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::AES_128_GCM, key)
            .map_err(|_| CryptoError::Provider("AES-128-GCM key setup failed"))?;
        Ok(Box::new(AwsLcGcm(aws_lc_rs::aead::LessSafeKey::new(unbound))))
    }

    fn hmac_sha256(&self, key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let k = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key);
        let mut ctx = aws_lc_rs::hmac::Context::with_key(&k);
        for p in parts {
            ctx.update(p);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.sign().as_ref());
        out
    }
}
