// SPDX-License-Identifier: LGPL-3.0-or-later
//! cephx errors, each mapped to the errno Ceph reports for the same failure.

use denc::DecodeError;

pub const EPERM: i32 = 1;
pub const ENOENT: i32 = 2;
pub const EIO: i32 = 5;
pub const EAGAIN: i32 = 11;
pub const EACCES: i32 = 13;
pub const EINVAL: i32 = 22;
pub const EOPNOTSUPP: i32 = 95;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CephxError {
    #[error("malformed cephx payload: {0}")]
    Decode(#[from] DecodeError),
    #[error("decryption failed: {0}")]
    Decrypt(String),
    #[error("bad magic {0:#x} after decryption (wrong key?)")]
    BadMagic(u64),
    #[error("unusable key: {0}")]
    BadKey(String),
    /// The monitor refused us (a negative status in CephXResponseHeader, or AUTH_BAD_METHOD's result).
    #[error("authentication rejected by the server: {}", errno_name(*errno))]
    Rejected { errno: i32 },
    #[error("no ticket for service {0:#x}")]
    NoTicket(u32),
    #[error("no rotating secret {secret_id} for service {service_id:#x}")]
    UnknownSecret { service_id: u32, secret_id: u64 },
    #[error("authorizer global_id {declared} does not match its ticket's {ticket}")]
    GlobalIdMismatch { declared: u64, ticket: u64 },
    #[error("ticket expired")]
    Expired,
    #[error("authorizer challenge answered wrongly")]
    ChallengeMismatch,
    #[error("authorizer reply nonce mismatch (expected {expected:#x}, got {got:#x})")]
    NonceMismatch { expected: u64, got: u64 },
    #[error("cephx protocol violation: {0}")]
    Protocol(String),
}

impl CephxError {
    /// The (positive) errno Ceph would report for this failure.
    pub fn errno(&self) -> i32 {
        match self {
            CephxError::Rejected { errno } => errno.abs(),
            CephxError::Decode(_) | CephxError::Protocol(_) => EINVAL,
            CephxError::NoTicket(_) => ENOENT,
            CephxError::BadKey(_) => EINVAL,
            // A key/challenge that does not verify is a permission failure, as in CephxClientHandler (-EPERM) and
            // the service side (-EACCES from the mon for a bad proof).
            CephxError::Decrypt(_)
            | CephxError::BadMagic(_)
            | CephxError::UnknownSecret { .. }
            | CephxError::GlobalIdMismatch { .. }
            | CephxError::Expired
            | CephxError::ChallengeMismatch
            | CephxError::NonceMismatch { .. } => EACCES,
        }
    }
}

fn errno_name(errno: i32) -> String {
    let name = match errno.abs() {
        EPERM => "(1) Operation not permitted",
        ENOENT => "(2) No such file or directory",
        EIO => "(5) Input/output error",
        EACCES => "(13) Permission denied",
        EINVAL => "(22) Invalid argument",
        EOPNOTSUPP => "(95) Operation not supported",
        _ => return format!("errno {}", errno.abs()),
    };
    name.to_string()
}
