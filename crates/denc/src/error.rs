// SPDX-License-Identifier: LGPL-3.0-or-later
//! Decoding errors. Every failure on hostile input is one of these values, never a panic.

/// Why a decode failed. Offsets are relative to the start of the buffer the [`crate::Decoder`] was made from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated input: needed {needed} bytes at offset {offset}, {remaining} remain")]
    Truncated {
        offset: usize,
        needed: usize,
        remaining: usize,
    },
    #[error("{type_name}: encoded with compat version {compat}, this decoder understands up to {supported}")]
    Incompatible {
        type_name: &'static str,
        compat: u8,
        supported: u8,
    },
    #[error("{type_name}: struct version {version} is older than the oldest supported {oldest}")]
    TooOld {
        type_name: &'static str,
        version: u8,
        oldest: u8,
    },
    #[error("{what}: length {len} exceeds the limit {limit}")]
    TooLong {
        what: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    #[error("{remaining} unexpected trailing bytes after {type_name}")]
    TrailingBytes {
        type_name: &'static str,
        remaining: usize,
    },
}

impl DecodeError {
    /// A malformed value whose bytes were all present.
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        DecodeError::Invalid {
            what,
            detail: detail.into(),
        }
    }
}

pub type Result<T, E = DecodeError> = std::result::Result<T, E>;
