// SPDX-License-Identifier: LGPL-3.0-or-later
//! cephx cryptography: AES-128-CBC with Ceph's fixed IV and PKCS#7 padding, HMAC-SHA256, random bytes, all behind
//! [`CryptoProvider`] (aws-lc-rs by default), plus [`CryptoKey`] and the `encode_encrypt` / `decode_decrypt`
//! envelope (`u8 1, le64 AUTH_ENC_MAGIC, payload`) that every encrypted cephx blob uses.

use bytes::Bytes;
use denc::{Decode, Decoder, Encode, Encoder};

use crate::error::CephxError;
use crate::types::UTime;

/// `CEPH_AES_IV`: cephx encrypts every blob with this constant IV (`src/auth/Crypto.cc`).
pub const CEPH_AES_IV: [u8; 16] = *b"cephsageyudagreg";

/// `AUTH_ENC_MAGIC`: the second field of every encrypted cephx plaintext; a wrong key shows up as a wrong magic.
pub const AUTH_ENC_MAGIC: u64 = 0xff00_9cad_8826_aa55;

/// `CEPH_CRYPTO_NONE` / `CEPH_CRYPTO_AES` key types.
pub const CRYPTO_NONE: u16 = 0;
pub const CRYPTO_AES: u16 = 1;

/// AES-128 key length; Ceph's AES keys are exactly this long.
pub const AES_KEY_LEN: usize = 16;

/// The crypto primitives cephx needs. A seam (as in rustls) so that the protocol logic is independent of the
/// library and a test can supply deterministic randomness.
pub trait CryptoProvider: Send + Sync {
    /// AES-128-CBC encryption with PKCS#7 padding (a whole block is added when the input is block-aligned).
    fn aes128_cbc_encrypt(&self, key: &[u8; 16], iv: &[u8; 16], plaintext: &[u8]) -> Vec<u8>;
    /// The inverse; fails on a length that is not a positive multiple of 16 or on bad padding.
    fn aes128_cbc_decrypt(
        &self,
        key: &[u8; 16],
        iv: &[u8; 16],
        ciphertext: &[u8],
    ) -> Result<Vec<u8>, CephxError>;
    fn hmac_sha256(&self, key: &[u8], data: &[u8]) -> [u8; 32];
    /// Fill `buf` with unpredictable bytes (challenges, nonces, session keys, connection secrets).
    fn fill_random(&self, buf: &mut [u8]);

    fn random_u64(&self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_random(&mut b);
        u64::from_le_bytes(b)
    }
}

/// The default provider, backed by aws-lc-rs.
#[derive(Debug, Clone, Copy, Default)]
pub struct AwsLcProvider;

impl CryptoProvider for AwsLcProvider {
    fn aes128_cbc_encrypt(&self, key: &[u8; 16], iv: &[u8; 16], plaintext: &[u8]) -> Vec<u8> {
        use aws_lc_rs::cipher::{AES_128, EncryptionContext, PaddedBlockEncryptingKey, UnboundCipherKey};
        let mut out = plaintext.to_vec();
        // A 16-byte key and a 16-byte IV are always valid for AES-128-CBC, so these cannot fail.
        #[allow(clippy::expect_used)]
        {
            let k = UnboundCipherKey::new(&AES_128, key).expect("16-byte AES-128 key");
            let k = PaddedBlockEncryptingKey::cbc_pkcs7(k).expect("CBC with PKCS#7");
            k.less_safe_encrypt(&mut out, EncryptionContext::Iv128((*iv).into()))
                .expect("AES-128-CBC encryption");
        }
        out
    }

    fn aes128_cbc_decrypt(
        &self,
        key: &[u8; 16],
        iv: &[u8; 16],
        ciphertext: &[u8],
    ) -> Result<Vec<u8>, CephxError> {
        use aws_lc_rs::cipher::{AES_128, DecryptionContext, PaddedBlockDecryptingKey, UnboundCipherKey};
        if ciphertext.is_empty() || !ciphertext.len().is_multiple_of(16) {
            return Err(CephxError::Decrypt(format!(
                "ciphertext length {} is not a positive multiple of 16",
                ciphertext.len()
            )));
        }
        let k = UnboundCipherKey::new(&AES_128, key)
            .and_then(PaddedBlockDecryptingKey::cbc_pkcs7)
            .map_err(|_| CephxError::Decrypt("bad AES key".into()))?;
        let mut buf = ciphertext.to_vec();
        let n = k
            .decrypt(&mut buf, DecryptionContext::Iv128((*iv).into()))
            .map_err(|_| CephxError::Decrypt("bad padding (wrong key?)".into()))?
            .len();
        buf.truncate(n);
        Ok(buf)
    }

    fn hmac_sha256(&self, key: &[u8], data: &[u8]) -> [u8; 32] {
        let k = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key);
        let tag = aws_lc_rs::hmac::sign(&k, data);
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }

    fn fill_random(&self, buf: &mut [u8]) {
        // The system RNG failing is not something a protocol engine can recover from.
        #[allow(clippy::expect_used)]
        aws_lc_rs::rand::fill(buf).expect("system random number generator");
    }
}

/// A cephx secret (`CryptoKey`): `le16 type, utime_t created, le16 len, secret`. A keyring's base64 `key` is
/// exactly this encoding (28 bytes for an AES key).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct CryptoKey {
    pub key_type: u16,
    pub created: UTime,
    pub secret: Bytes,
}

impl std::fmt::Debug for CryptoKey {
    // Never print secrets into logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CryptoKey")
            .field("key_type", &self.key_type)
            .field("created", &self.created)
            .field("secret_len", &self.secret.len())
            .finish()
    }
}

impl CryptoKey {
    /// A new AES key with the given 16 secret bytes.
    pub fn new_aes(secret: [u8; 16], created: UTime) -> Self {
        CryptoKey {
            key_type: CRYPTO_AES,
            created,
            secret: Bytes::copy_from_slice(&secret),
        }
    }

    /// A fresh random AES key (session keys, rotating keys).
    pub fn generate(provider: &dyn CryptoProvider, created: UTime) -> Self {
        let mut s = [0u8; 16];
        provider.fill_random(&mut s);
        CryptoKey::new_aes(s, created)
    }

    /// Parse a keyring `key = AQ...==` value.
    pub fn from_base64(text: &str) -> Result<Self, CephxError> {
        let raw =
            crate::base64::decode(text.trim()).map_err(|e| CephxError::BadKey(format!("base64: {e}")))?;
        let key = CryptoKey::decode_all(Bytes::from(raw))
            .map_err(|e| CephxError::BadKey(format!("key encoding: {e}")))?;
        key.aes_key()?;
        Ok(key)
    }

    /// The keyring text form.
    pub fn to_base64(&self) -> String {
        crate::base64::encode(&self.to_bytes(0))
    }

    /// The AES-128 key bytes, or an error for a key that cannot encrypt (type none, wrong length).
    pub fn aes_key(&self) -> Result<&[u8; 16], CephxError> {
        if self.key_type != CRYPTO_AES {
            return Err(CephxError::BadKey(format!(
                "key type {} is not AES (1)",
                self.key_type
            )));
        }
        <&[u8; 16]>::try_from(&self.secret[..]).map_err(|_| {
            CephxError::BadKey(format!(
                "AES key is {} bytes, not {AES_KEY_LEN}",
                self.secret.len()
            ))
        })
    }

    pub fn encrypt(&self, provider: &dyn CryptoProvider, plaintext: &[u8]) -> Result<Vec<u8>, CephxError> {
        Ok(provider.aes128_cbc_encrypt(self.aes_key()?, &CEPH_AES_IV, plaintext))
    }

    pub fn decrypt(&self, provider: &dyn CryptoProvider, ciphertext: &[u8]) -> Result<Vec<u8>, CephxError> {
        provider.aes128_cbc_decrypt(self.aes_key()?, &CEPH_AES_IV, ciphertext)
    }

    pub fn is_empty(&self) -> bool {
        self.secret.is_empty()
    }
}

impl Decode for CryptoKey {
    fn decode(d: &mut Decoder) -> denc::Result<Self> {
        let key_type = d.u16()?;
        let created = UTime::decode(d)?;
        let len = d.u16()? as usize;
        let secret = d.take_bytes(len)?;
        Ok(CryptoKey {
            key_type,
            created,
            secret,
        })
    }
}

impl Encode for CryptoKey {
    fn encode(&self, e: &mut Encoder) {
        e.u16(self.key_type);
        self.created.encode(e);
        // Secrets come from our own code or a decode with a u16 length, so they always fit.
        e.u16(self.secret.len().min(u16::MAX as usize) as u16);
        e.raw(&self.secret[..self.secret.len().min(u16::MAX as usize)]);
    }
}

/// `encode_encrypt_enc_bl`: the ciphertext of `u8 1, le64 magic, encode(t)`, with no length prefix.
pub fn encrypt_enc_bl<T: Encode + ?Sized>(
    provider: &dyn CryptoProvider,
    key: &CryptoKey,
    t: &T,
) -> Result<Bytes, CephxError> {
    let mut e = Encoder::default();
    e.u8(1);
    e.u64(AUTH_ENC_MAGIC);
    t.encode(&mut e);
    Ok(Bytes::from(key.encrypt(provider, e.as_slice())?))
}

/// `encode_encrypt`: as [`encrypt_enc_bl`], appended to `out` as a bufferlist (`le32 len` + ciphertext).
pub fn encode_encrypt<T: Encode + ?Sized>(
    provider: &dyn CryptoProvider,
    key: &CryptoKey,
    t: &T,
    out: &mut Encoder,
) -> Result<(), CephxError> {
    let c = encrypt_enc_bl(provider, key, t)?;
    out.bytes(&c);
    Ok(())
}

/// `decode_decrypt_enc_bl`: decrypt a whole ciphertext, check the envelope and decode `T` from it. Like Ceph, bytes
/// after `T` inside the plaintext are ignored.
pub fn decrypt_enc_bl<T: Decode>(
    provider: &dyn CryptoProvider,
    key: &CryptoKey,
    ciphertext: &[u8],
) -> Result<T, CephxError> {
    let plain = key.decrypt(provider, ciphertext)?;
    let mut d = Decoder::new(plain);
    let _struct_v = d.u8()?;
    let magic = d.u64()?;
    if magic != AUTH_ENC_MAGIC {
        return Err(CephxError::BadMagic(magic));
    }
    Ok(T::decode(&mut d)?)
}

/// `decode_decrypt`: read a bufferlist from `d` and [`decrypt_enc_bl`] it.
pub fn decode_decrypt<T: Decode>(
    provider: &dyn CryptoProvider,
    key: &CryptoKey,
    d: &mut Decoder,
) -> Result<T, CephxError> {
    let bl = d.bufferlist()?;
    decrypt_enc_bl(provider, key, &bl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbc_matches_a_known_vector() {
        // NIST SP 800-38A F.2.1 (CBC-AES128.Encrypt), first block, then PKCS#7 adds one full padding block.
        let key = [
            0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
        ];
        let iv: [u8; 16] = std::array::from_fn(|i| i as u8);
        let pt = [
            0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e, 0x11, 0x73, 0x93, 0x17, 0x2a,
        ];
        let ct = AwsLcProvider.aes128_cbc_encrypt(&key, &iv, &pt);
        assert_eq!(ct.len(), 32, "aligned input gets a whole padding block");
        assert_eq!(
            &ct[..16],
            &[
                0x76, 0x49, 0xab, 0xac, 0x81, 0x19, 0xb2, 0x46, 0xce, 0xe9, 0x8e, 0x9b, 0x12, 0xe9, 0x19,
                0x7d
            ]
        );
        assert_eq!(AwsLcProvider.aes128_cbc_decrypt(&key, &iv, &ct).unwrap(), pt);
    }

    #[test]
    fn hmac_sha256_rfc4231_case2() {
        let tag = AwsLcProvider.hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            crate::tests::hex(&tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn envelope_round_trip_and_wrong_key() {
        let p = AwsLcProvider;
        let k1 = CryptoKey::generate(&p, UTime::default());
        let k2 = CryptoKey::generate(&p, UTime::default());
        let c = encrypt_enc_bl(&p, &k1, &0x1122_3344_5566_7788u64).unwrap();
        // 1 + 8 + 8 = 17 bytes of plaintext pad to 32.
        assert_eq!(c.len(), 32);
        assert_eq!(decrypt_enc_bl::<u64>(&p, &k1, &c).unwrap(), 0x1122_3344_5566_7788);
        assert!(decrypt_enc_bl::<u64>(&p, &k2, &c).is_err());
        assert!(decrypt_enc_bl::<u64>(&p, &k1, &c[..31]).is_err());
    }

    #[test]
    fn keyring_key_parses_to_28_bytes() {
        let k = CryptoKey::from_base64("AQCOQQ1r+pxqMhAA/A4H9RqJUVqqGFNSGtAfxg==").unwrap();
        assert_eq!(k.key_type, CRYPTO_AES);
        assert_eq!(k.secret.len(), 16);
        assert_eq!(k.to_bytes(0).len(), 28);
        assert_eq!(k.to_base64(), "AQCOQQ1r+pxqMhAA/A4H9RqJUVqqGFNSGtAfxg==");
        assert!(CryptoKey::from_base64("AQCOQQ1r").is_err());
        assert!(CryptoKey::from_base64("not base64!").is_err());
    }
}
