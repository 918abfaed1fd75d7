// SPDX-License-Identifier: LGPL-3.0-or-later
//! Receive buffers that report when their memory is freed (a dev-dependency of the crates whose tests use it).
//!
//! Decoding is zero-copy: a decoded message's names and payloads are slices of the buffer it was received in,
//! and each slice keeps the whole buffer alive. What a PG or an OSD keeps for long (logs, missing sets, caches)
//! must hold copies. The memory tests of `pg` and `osd-core` put a message's bytes in a [`rx_buffer`], run the
//! message to completion, drop everything that should be transient, and check [`Freed::is_freed`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

/// The size of a receive buffer (a message's bytes are a slice of one at least this large, as with the
/// messenger's reads).
pub const RX_BUFFER_SIZE: usize = 64 << 10;

/// Turns true once the buffer it was handed out with is freed.
#[derive(Clone, Debug)]
pub struct Freed(Arc<AtomicBool>);

impl Freed {
    pub fn is_freed(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

struct RxBuf {
    bytes: Vec<u8>,
    freed: Arc<AtomicBool>,
}

impl AsRef<[u8]> for RxBuf {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for RxBuf {
    fn drop(&mut self) {
        self.freed.store(true, Ordering::SeqCst);
    }
}

/// `content` as a slice at the start of a buffer of at least [`RX_BUFFER_SIZE`] bytes, and the buffer's flag.
pub fn rx_buffer(content: &[u8]) -> (Bytes, Freed) {
    let freed = Arc::new(AtomicBool::new(false));
    let mut bytes = content.to_vec();
    bytes.resize(bytes.len().max(RX_BUFFER_SIZE), 0);
    let b = Bytes::from_owner(RxBuf {
        bytes,
        freed: freed.clone(),
    });
    (b.slice(..content.len()), Freed(freed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_once_every_slice_is_gone() {
        let (b, freed) = rx_buffer(b"name");
        assert_eq!(&b[..], b"name");
        let tail = b.slice(2..);
        drop(b);
        assert!(!freed.is_freed(), "a slice still holds the buffer");
        let copy = Bytes::copy_from_slice(&tail);
        drop(tail);
        assert!(freed.is_freed());
        assert_eq!(&copy[..], b"me");
    }
}
