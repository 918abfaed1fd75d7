// SPDX-License-Identifier: LGPL-3.0-or-later
//! `cargo xtask bench compare`: one throwaway Ceph cluster holding two groups of OSDs (by default classic
//! BlueStore `ceph-osd` and FerroCeph's `ferro-osd`), the same number of each on equal-size files, each group
//! with its own CRUSH device class, rule and pool. The same test matrix (fio `ioengine=rados` over many 4 MiB
//! objects, plus OMAP tests through python3-rados) runs against both pools, alternating, and the OSD
//! processes' CPU time and RSS are sampled around every test. The result is a JSON file, a Markdown table and
//! an SVG chart.
//!
//! The pure parts (job files, fio/omap output parsing, `/proc` parsing, ratios, rendering) live in their own
//! modules and are unit-tested without a cluster; [`run`] is the thin driver that starts processes.
//!
//! A third kind, `raw`, is no OSD: the same fio tests straight on files beside the OSDs' device files (module
//! `raw`), the device's ceiling for each row, reported beside the groups and never as a group.
//!
//! OSD kinds are parameters ([`GroupSpec`]): CI's smoke test and pipeline checks can run two classic groups,
//! and when `ferro-osd` is missing or fails to boot its group is reported as skipped, with the reason, and
//! the rest still runs. Numbers are never invented for a group that did not run.

mod cli;
mod diskstat;
mod error;
mod fio;
mod idle;
mod matrix;
mod omap;
mod osdperf;
mod procstat;
mod raw;
mod render;
mod report;
mod rounds;
mod runner;
mod util;

pub use cli::{CompareArgs, main_with_args};
pub use error::{BenchError, Result};
pub use fio::{FioJob, job_file, parse_fio_json};
pub use idle::{HALT_POLL_NS, HaltPollGuard, set_halt_poll};
pub use matrix::{MATRIX, OmapOp, TestDef, Workload, select_tests};
pub use omap::{OMAP_SCRIPT, parse_omap_json};
pub use procstat::{ProcSample, parse_stat_cpu_ticks, parse_status_rss_kib};
pub use raw::{RAW_ENGINE, RawJob, RawRow, parse_raw_fio, raw_job_file, raw_jobs};
pub use render::{markdown_table, svg_chart};
pub use report::{
    Attainable, DEVICE_BOUND_SHARE, GroupReport, GroupStatus, IOPS_TARGET, Measurement, Meta, P99_TARGET,
    Ratios, RawCell, RawSetup, RawShare, Report, Row, TestReport, geomean,
};
pub use runner::{BlueStoreProfile, GroupSpec, OsdKind, RunOptions, run};
