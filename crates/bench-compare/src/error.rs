// SPDX-License-Identifier: LGPL-3.0-or-later
//! Errors of the benchmark driver and its parsers.

/// Anything that stops a benchmark run or a single test.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The throwaway cluster failed (start, a CLI call, an OSD).
    #[error("cluster: {0}")]
    Cluster(#[from] testcluster::ClusterError),
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A tool ran and failed, or exceeded its time bound.
    #[error("`{command}` failed: {detail}")]
    Tool {
        /// The command line.
        command: String,
        /// Exit status and the tail of its output.
        detail: String,
    },
    /// A tool's output could not be understood.
    #[error("unexpected output from {tool}: {detail}")]
    BadOutput {
        /// Which tool.
        tool: String,
        /// What was wrong.
        detail: String,
    },
    /// The options make no sense (unknown test name, pool size without enough OSDs...).
    #[error("invalid options: {0}")]
    Usage(String),
    /// A required tool is not installed.
    #[error("{0} not found (./scripts/setup.sh installs it)")]
    Missing(String),
}

/// Result with [`BenchError`].
pub type Result<T> = std::result::Result<T, BenchError>;

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let context = context.into();
    move |source| BenchError::Io { context, source }
}

pub(crate) fn bad(tool: &str, detail: impl Into<String>) -> BenchError {
    BenchError::BadOutput {
        tool: tool.to_owned(),
        detail: detail.into(),
    }
}
