// SPDX-License-Identifier: LGPL-3.0-or-later
//! Typed errors of the engine and their mapping to the errno values Ceph returns.

use thiserror::Error;

/// Every failure a store operation can report. Expected outcomes (missing object, missing attr) are values,
/// not panics; `errno()` maps them to what Ceph's ObjectStore returns.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    #[error("no such object or collection")]
    NotFound,
    #[error("object or collection already exists")]
    Exists,
    #[error("no such attribute")]
    NoData,
    #[error("collection not empty")]
    NotEmpty,
    #[error("checksum mismatch reading device offset {offset}")]
    Checksum { offset: u64 },
    #[error("device I/O error: {0}")]
    Io(String),
    #[error("no space left on device")]
    NoSpace,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    #[error("too large: {0}")]
    TooLarge(&'static str),
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    #[error("corrupt on-disk metadata: {0}")]
    Corrupt(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

impl StoreError {
    /// The (positive) errno Ceph uses for this outcome; callers negate it for the wire.
    pub fn errno(&self) -> i32 {
        match self {
            StoreError::NotFound => libc::ENOENT,
            StoreError::Exists => libc::EEXIST,
            StoreError::NoData => libc::ENODATA,
            StoreError::NotEmpty => libc::ENOTEMPTY,
            StoreError::Checksum { .. } | StoreError::Io(_) | StoreError::Corrupt(_) => libc::EIO,
            StoreError::NoSpace => libc::ENOSPC,
            StoreError::Invalid(_) => libc::EINVAL,
            StoreError::TooLarge(_) => libc::E2BIG,
            StoreError::Unsupported(_) => libc::EOPNOTSUPP,
        }
    }

    /// True for errors that mean the media returned bad bytes (reported, never passed on as data).
    pub fn is_media_error(&self) -> bool {
        matches!(
            self,
            StoreError::Checksum { .. } | StoreError::Io(_) | StoreError::Corrupt(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping_matches_ceph() {
        assert_eq!(StoreError::NotFound.errno(), 2);
        assert_eq!(StoreError::Exists.errno(), 17);
        assert_eq!(StoreError::Checksum { offset: 0 }.errno(), 5);
        assert_eq!(StoreError::NoSpace.errno(), 28);
        assert_eq!(StoreError::Invalid("x").errno(), 22);
        assert_eq!(StoreError::NoData.errno(), 61);
        assert_eq!(StoreError::Unsupported("x").errno(), 95);
        assert_eq!(StoreError::NotEmpty.errno(), 39);
    }
}
