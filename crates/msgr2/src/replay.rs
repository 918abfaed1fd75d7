// SPDX-License-Identifier: LGPL-3.0-or-later
//! Offline reading of a captured msgr2 byte stream (one direction of one TCP connection): banner, frames, where
//! the pre-auth bytes end (what AUTH_SIGNATURE signs), and — given the connection secret — decryption of the
//! secure-mode part. Used by capture tests here and in cephx (which derives session keys and connection secrets
//! from the keyrings).

use crate::auth::CON_MODE_SECURE;
use crate::control::{BANNER_HEAD_LEN, BANNER_PAYLOAD_LEN, BANNER_PREFIX, Banner, Control};
use crate::crypto::CryptoProvider;
use crate::frame::{
    Frame, FrameDecoder, FrameError, FrameLimits, PREAMBLE_LEN, Preamble, Role, SecureRx, Tag,
};

/// One direction of a captured connection, parsed.
#[derive(Debug)]
pub struct StreamFrames {
    pub banner: Banner,
    pub frames: Vec<Frame>,
    /// Bytes of the stream (banner included) sent before the sender switched to the session's mode: exactly the
    /// bytes the *receiver* signs in its AUTH_SIGNATURE (HMAC-SHA256 keyed by the session key).
    pub pre_auth_len: usize,
    /// Index in `frames` of the first frame sent after the switch, if the stream got that far.
    pub switched_at: Option<usize>,
    /// Bytes left unparsed at the end (a frame cut off by the end of the capture).
    pub trailing: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("not a msgr2 stream (no \"ceph v2\" banner)")]
    NotMsgr2,
    #[error("frame {index}: {error}")]
    Frame { index: usize, error: FrameError },
}

/// Parse one direction of a capture. `sender` is the role of the side that *sent* these bytes. `secret`, when
/// given, is the connection secret used to decrypt the part after the auth exchange if the session is secure;
/// without it only crc-mode streams parse past AUTH_DONE.
pub fn parse_stream(
    data: &[u8],
    sender: Role,
    secret: Option<(&dyn CryptoProvider, &[u8])>,
) -> Result<StreamFrames, ReplayError> {
    let head = BANNER_HEAD_LEN + BANNER_PAYLOAD_LEN;
    if data.len() < head || &data[..8] != BANNER_PREFIX {
        return Err(ReplayError::NotMsgr2);
    }
    let u64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&data[o..o + 8]);
        u64::from_le_bytes(a)
    };
    let banner = Banner {
        supported: u64_at(10),
        required: u64_at(18),
    };
    let receiver = match sender {
        Role::Connector => Role::Acceptor,
        Role::Acceptor => Role::Connector,
    };
    let mut dec = FrameDecoder::new(FrameLimits::default());
    dec.push(&data[head..]);
    let mut frames: Vec<Frame> = Vec::new();
    let mut pre_auth_len = None;
    let mut switched_at = None;
    let plaintext_preamble = |b: &[u8]| -> Option<Preamble> {
        let p: &[u8; PREAMBLE_LEN] = b.get(..PREAMBLE_LEN)?.try_into().ok()?;
        Preamble::decode(p, &FrameLimits::default()).ok()
    };
    loop {
        // Mode switch points: the acceptor right after sending AUTH_DONE; the connector after its last auth
        // request, recognisable because what follows is no longer a plaintext preamble (or is AUTH_SIGNATURE,
        // in crc mode).
        if pre_auth_len.is_none()
            && let Some(last) = frames.last()
        {
            let next = dec.peek_buffered();
            let done_frame = frames.iter().find(|f| f.tag() == Some(Tag::AuthDone));
            let switch = match sender {
                Role::Acceptor => last.tag() == Some(Tag::AuthDone),
                Role::Connector => {
                    matches!(last.tag(), Some(Tag::AuthRequest | Tag::AuthRequestMore))
                        && next.len() >= PREAMBLE_LEN
                        && plaintext_preamble(&next).is_none_or(|p| p.tag == Tag::AuthSignature as u8)
                }
            };
            if switch {
                pre_auth_len = Some(data.len() - next.len());
                switched_at = Some(frames.len());
                let secure = match (sender, done_frame) {
                    (Role::Acceptor, Some(f)) => matches!(
                        Control::decode(Tag::AuthDone, f.segments[0].clone()),
                        Ok(Control::AuthDone {
                            con_mode: CON_MODE_SECURE,
                            ..
                        })
                    ),
                    _ => plaintext_preamble(&next).is_none(),
                };
                if secure {
                    let Some((provider, secret)) = secret else {
                        break;
                    };
                    let rx =
                        SecureRx::new(provider, secret, receiver).map_err(|error| ReplayError::Frame {
                            index: frames.len(),
                            error,
                        })?;
                    dec.set_secure(Some(rx));
                }
            }
        }
        match dec.next_frame() {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => break,
            Err(error) => {
                return Err(ReplayError::Frame {
                    index: frames.len(),
                    error,
                });
            }
        }
    }
    let trailing = dec.buffered();
    Ok(StreamFrames {
        banner,
        frames,
        pre_auth_len: pre_auth_len.unwrap_or(data.len() - trailing),
        switched_at,
        trailing,
    })
}
