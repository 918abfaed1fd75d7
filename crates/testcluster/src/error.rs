// SPDX-License-Identifier: LGPL-3.0-or-later
//! Errors of the throwaway cluster. Every variant that comes from a daemon carries the tail of its logs,
//! because "timed out" alone is useless in a CI log.

use std::path::PathBuf;
use std::time::Duration;

/// Anything that can go wrong while starting, using or stopping a throwaway cluster.
#[derive(thiserror::Error)]
pub enum ClusterError {
    /// A file-system or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A required Ceph binary is not on PATH.
    #[error("`{0}` not found on PATH; install Ceph 16.2 (./scripts/setup.sh does it on Debian 12)")]
    MissingBinary(String),
    /// A command ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}):\n{stderr}")]
    CommandFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error (and output, if stderr was empty).
        stderr: String,
    },
    /// A command or a wait loop exceeded its time bound.
    #[error("timed out after {after:?} waiting for {what}\n{logs}")]
    Timeout {
        /// What we waited for.
        what: String,
        /// The bound that was exceeded.
        after: Duration,
        /// Tails of the relevant daemon logs.
        logs: String,
    },
    /// A daemon we started exited while we waited for the cluster to get somewhere.
    #[error("daemon {name} exited unexpectedly while waiting for {what}\n{logs}")]
    DaemonDied {
        /// The daemon's name, e.g. `osd.0`.
        name: String,
        /// What we waited for.
        what: String,
        /// Tail of its logs.
        logs: String,
    },
    /// A command printed something we could not parse.
    #[error("unexpected output from `{command}`: {detail}")]
    BadOutput {
        /// The command line.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// The directory cannot host a new cluster.
    #[error("cannot use {dir}: {reason}")]
    BadDir {
        /// The directory.
        dir: PathBuf,
        /// Why not.
        reason: String,
    },
    /// The request does not fit this cluster (e.g. PG states without a mgr).
    #[error("{0}")]
    Unsupported(String),
    /// Some of our processes survived `stop`.
    #[error("processes still alive after stop: {0:?}")]
    Survivors(Vec<(String, u32)>),
}

/// Debug shows the Display text: tests `unwrap()` these errors, and the log tails they carry must stay
/// readable (multi-line) in a test failure instead of one escaped string.
impl std::fmt::Debug for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Result alias for this crate.
pub type Result<T, E = ClusterError> = std::result::Result<T, E>;

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let context = context.into();
    move |source| ClusterError::Io { context, source }
}
