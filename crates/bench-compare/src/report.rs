// SPDX-License-Identifier: LGPL-3.0-or-later
//! The result of a run: per test and group a [`Row`], ratios of the second group to the first (the
//! baseline, BlueStore by default) and their geometric means, and the JSON form.

use serde_json::{Value, json};

use crate::raw::RawRow;

/// What the client saw in one test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Operations completed.
    pub ops: u64,
    /// Wall time they took.
    pub runtime_s: f64,
    /// Operations per second.
    pub iops: f64,
    /// Payload megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Median latency.
    pub lat_p50_us: f64,
    /// 99th percentile latency.
    pub lat_p99_us: f64,
}

/// A thread name (`comm`, at most 15 bytes on Linux), kept inline so that [`Row`] stays `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadName([u8; 16], u8);

impl ThreadName {
    /// Up to 16 bytes of `s` (cut at a char boundary).
    pub fn new(s: &str) -> Self {
        let mut n = s.len().min(16);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        let mut b = [0u8; 16];
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        ThreadName(b, n as u8)
    }
    /// The name.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0[..self.1 as usize]).unwrap_or("?")
    }
}

/// One test on one group: the client's view plus the group's OSD processes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Client-side numbers.
    pub m: Measurement,
    /// OSD CPU time (user + system, all OSDs of the group) during the test divided by `m.ops`.
    pub osd_cpu_us_per_op: f64,
    /// Summed RSS of the group's OSDs at the end of the test.
    pub osd_rss_bytes: u64,
    /// Context switches of all the group's OSD threads during the test divided by `m.ops`: voluntary (a thread
    /// went to sleep) and involuntary (preempted). What a wake-up costs shows up here before it shows in CPU.
    pub osd_ctxt_vol_per_op: f64,
    pub osd_ctxt_invol_per_op: f64,
    /// The busiest OSD thread over the test: its share of one CPU (1.0: it never rested, so the OSD is bound by
    /// that thread) and its name. `None` before a first sample.
    pub osd_busiest_thread: Option<(ThreadName, f64)>,
    /// CPU time of the benchmark client (fio or the OMAP script, all threads) divided by `m.ops`: on a small
    /// machine the client shares the CPUs, so a row can be bound by it.
    pub client_cpu_us_per_op: f64,
    /// Busy CPU time of the whole machine (every process and kernel thread) during the test divided by `m.ops`.
    pub machine_cpu_us_per_op: f64,
    /// The OSDs' own latency counters over the test (write, read, replica write, store commit).
    pub osd_lat: crate::osdperf::OsdLatency,
    /// Run-queue accounting (`schedstat`) of all the group's OSD threads over the test: time on a CPU, time
    /// runnable but waiting for one, timeslices.
    pub osd_sched: crate::procstat::SchedStat,
    /// The same for ferro-osd's reactor threads (`ferro-core-*`) only; `None` for other kinds.
    pub reactor_sched: Option<crate::procstat::SchedStat>,
    /// The block device under the OSDs' files over the test (all its IO, not only this group's); `None` where
    /// the files sit on no block device.
    pub device: Option<crate::diskstat::DiskStat>,
    /// The wait for the disk to go quiet before the test ([`crate::diskstat::settle`]); `None` where the files
    /// sit on no block device.
    pub settle: Option<crate::diskstat::Settle>,
}

impl Row {
    /// Run-queue wait of the OSD threads per client op, µs.
    pub fn osd_wait_us_per_op(&self) -> f64 {
        self.osd_sched.wait_ns as f64 / 1e3 / self.m.ops.max(1) as f64
    }
}

/// Whether a group ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupStatus {
    /// Its OSDs booted and its pool was created.
    Ran,
    /// It did not run; why.
    Skipped(String),
}

/// One group of OSDs of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupReport {
    /// Label used in tables (`bluestore`, `ferro`).
    pub label: String,
    /// OSD kind (`classic`, `ferro`).
    pub kind: String,
    /// CRUSH device class of its OSDs.
    pub device_class: String,
    /// Its pool.
    pub pool: String,
    /// Its OSD ids.
    pub osd_ids: Vec<u32>,
    /// Ran or skipped.
    pub status: GroupStatus,
    /// The scheduling of its OSD threads after boot (ferro-osd: the reactor threads), as the kernel shows it in
    /// `/proc` (e.g. `SCHED_OTHER nice 0 slice 300 µs (×1)`); empty if unknown.
    pub sched: String,
}

/// One test across groups.
#[derive(Debug, Clone, PartialEq)]
pub struct TestReport {
    /// Test id (see `MATRIX`).
    pub id: String,
    /// Human title.
    pub title: String,
    /// One entry per group, in group order: the row, or why there is none.
    pub results: Vec<Result<Row, String>>,
    /// The raw reference (`None` when the run has no `raw` kind).
    pub raw: Option<RawCell>,
    /// With several rounds (`--rounds`), every round's row per group (`rounds[group][round]`); `results` then
    /// holds their medians ([`crate::rounds::combine`]). Empty for a run of one round.
    pub rounds: Vec<Vec<Result<Row, String>>>,
}

/// The raw reference of one test.
#[derive(Debug, Clone, PartialEq)]
pub enum RawCell {
    /// It ran.
    Row(RawRow),
    /// The test has no raw analogue (OMAP): why. Never a zero.
    NotApplicable(String),
    /// It failed: why.
    Failed(String),
}

/// How the raw reference was set up (see the `raw` module).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawSetup {
    /// fio engine.
    pub engine: String,
    /// Files (one per replica: the write tests run one job on each).
    pub files: u32,
    /// Size of each file (that of one OSD's device file).
    pub file_size_bytes: u64,
    /// Bytes each job addresses (a pool's data set).
    pub region_bytes: u64,
    /// `zero-filled`, or `data set zero-filled` (quick mode: the rest of the file sparse).
    pub prepared: String,
}

/// Issue #7's targets for the second group against the first: IOPS at least this many times...
pub const IOPS_TARGET: f64 = 2.0;
/// ... and p99 at most this fraction.
pub const P99_TARGET: f64 = 0.4;
/// A kind that gets at least this share of the raw reference's IOPS on a test is called device-bound there: what
/// is left to gain on that row is in the device, not in the OSD.
pub const DEVICE_BOUND_SHARE: f64 = 0.8;

/// The best ratio of the second group to the first that the device leaves possible on one test, if the OSD
/// cannot beat the raw files (it can in principle: a cache hit skips the device, one flush can cover several
/// writes): IOPS at most `raw / first`, p99 at least `raw / first`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attainable {
    /// Largest attainable IOPS ratio.
    pub iops_max: f64,
    /// Smallest attainable p99 ratio.
    pub lat_p99_min: f64,
}

impl Attainable {
    /// A short note when the device puts a target out of reach; empty otherwise.
    pub fn note(&self) -> String {
        let mut n = Vec::new();
        if self.iops_max < IOPS_TARGET {
            n.push(format!(
                "{IOPS_TARGET}× IOPS out of reach (≤ {:.2}×)",
                self.iops_max
            ));
        }
        if self.lat_p99_min > P99_TARGET {
            n.push(format!(
                "{P99_TARGET}× p99 out of reach (≥ {:.2}×)",
                self.lat_p99_min
            ));
        }
        n.join("; ")
    }

    fn to_json(self) -> Value {
        let f = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        json!({ "iops_max": f(self.iops_max), "lat_p99_min": f(self.lat_p99_min) })
    }
}

/// A group's row as a share of the raw reference's: IOPS (≤ 1 unless the OSD beats the device) and p99.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawShare {
    /// Group IOPS / raw IOPS.
    pub iops: f64,
    /// Group p99 / raw p99.
    pub lat_p99: f64,
}

/// Second group divided by the first, per metric (>1 means "more": good for IOPS, bad for latency/CPU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratios {
    /// IOPS ratio.
    pub iops: f64,
    /// Throughput ratio.
    pub mb_per_s: f64,
    /// Median latency ratio.
    pub lat_p50: f64,
    /// p99 latency ratio.
    pub lat_p99: f64,
    /// CPU per operation ratio.
    pub osd_cpu_per_op: f64,
    /// RSS ratio.
    pub osd_rss: f64,
}

impl Ratios {
    fn of(a: &Row, b: &Row) -> Ratios {
        let r = |x: f64, y: f64| if y > 0.0 { x / y } else { f64::NAN };
        Ratios {
            iops: r(b.m.iops, a.m.iops),
            mb_per_s: r(b.m.mb_per_s, a.m.mb_per_s),
            lat_p50: r(b.m.lat_p50_us, a.m.lat_p50_us),
            lat_p99: r(b.m.lat_p99_us, a.m.lat_p99_us),
            osd_cpu_per_op: r(b.osd_cpu_us_per_op, a.osd_cpu_us_per_op),
            osd_rss: r(b.osd_rss_bytes as f64, a.osd_rss_bytes as f64),
        }
    }

    fn to_json(self) -> Value {
        let f = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        json!({
            "iops": f(self.iops),
            "mb_per_s": f(self.mb_per_s),
            "lat_p50": f(self.lat_p50),
            "lat_p99": f(self.lat_p99),
            "osd_cpu_per_op": f(self.osd_cpu_per_op),
            "osd_rss": f(self.osd_rss),
        })
    }
}

/// Geometric mean of the finite, positive values; `NaN` if there are none.
pub fn geomean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((0.0, 0u32), |(s, n), v| (s + v.ln(), n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (sum / f64::from(n)).exp()
    }
}

/// Where and how the run happened.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Meta {
    /// Start time, `YYYY-MM-DD HH:MM UTC`.
    pub date_utc: String,
    /// `git describe`-like commit of the workspace (with `-dirty` if the tree had changes).
    pub commit: String,
    /// CPU model and count, memory.
    pub machine: String,
    /// Kernel release.
    pub kernel: String,
    /// How idle CPUs wait: cpuidle driver, governor, and the VM's halt polling budget if it has one.
    pub cpu_idle: String,
    /// The settings profile the classic OSDs ran with (`auto`, `ssd`, `hdd`: `--bluestore-profile`).
    pub bluestore_profile: String,
    /// Whether the disk under the cluster says it is rotational (`None`: no block device found). Under `auto`,
    /// BlueStore and ceph-osd take their HDD settings when it does.
    pub disk_rotational: Option<bool>,
    /// `/proc/loadavg` (1, 5, 15 min) when the run started and when it ended: the machine may be shared.
    pub load_start: String,
    pub load_end: String,
    /// Share of the vCPUs' time the host stole over the run (`/proc/stat` steal), in percent; None where the
    /// kernel does not count it.
    pub cpu_steal_percent: Option<f64>,
    /// `ceph --version`.
    pub ceph_version: String,
    /// `fio --version`.
    pub fio_version: String,
    /// Replicas per pool.
    pub pool_size: u32,
    /// OSDs in each group.
    pub osds_per_group: u32,
    /// Size of each OSD's device file.
    pub device_size_bytes: u64,
    /// How the device files were prepared: `zero-filled` or `sparse`.
    pub device_files: String,
    /// 4 MiB objects per pool.
    pub objects: u32,
    /// Seconds per test and group.
    pub runtime_s: u32,
    /// Quick (smoke test) mode.
    pub quick: bool,
    /// Reactor cores (ferrostore shards) per ferro-osd, if a ferro group is in the run.
    pub ferro_shards: Option<u32>,
    /// Configuration options given to every ferro-osd (`--ferro-conf key=value`), as `key=value`.
    pub ferro_conf: Vec<String>,
    /// The raw reference, if the run has one.
    pub raw: Option<RawSetup>,
    /// Rounds of the matrix (`--rounds`; 0 and 1 both mean one): each group's numbers are medians over them.
    pub rounds: u32,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Context.
    pub meta: Meta,
    /// The groups (index 0 is the baseline of every ratio).
    pub groups: Vec<GroupReport>,
    /// Every selected test.
    pub tests: Vec<TestReport>,
}

impl Report {
    /// Ratios of group 1 to group 0 for test `i`, if both have a row.
    pub fn ratios(&self, i: usize) -> Option<Ratios> {
        let t = self.tests.get(i)?;
        match (t.results.first()?, t.results.get(1)?) {
            (Ok(a), Ok(b)) => Some(Ratios::of(a, b)),
            _ => None,
        }
    }

    /// Geometric means of the per-test ratios, over the tests where both groups have a row.
    pub fn geomean_ratios(&self) -> Option<Ratios> {
        Self::geomean_of((0..self.tests.len()).filter_map(|i| self.ratios(i)).collect())
    }

    /// Rounds kept per test (0 for a run of one round).
    pub fn rounds_kept(&self) -> usize {
        self.tests
            .iter()
            .map(|t| t.rounds.iter().map(Vec::len).max().unwrap_or(0))
            .max()
            .unwrap_or(0)
    }

    /// Ratios of group 1 to group 0 for test `i` in round `k` alone (the two rows of one round ran minutes
    /// apart on the same machine), if both have a row there.
    pub fn round_ratios(&self, i: usize, k: usize) -> Option<Ratios> {
        let t = self.tests.get(i)?;
        match (t.rounds.first()?.get(k)?, t.rounds.get(1)?.get(k)?) {
            (Ok(a), Ok(b)) => Some(Ratios::of(a, b)),
            _ => None,
        }
    }

    /// Geometric means of round `k`'s ratios: what that round alone would have reported.
    pub fn round_geomean_ratios(&self, k: usize) -> Option<Ratios> {
        Self::geomean_of(
            (0..self.tests.len())
                .filter_map(|i| self.round_ratios(i, k))
                .collect(),
        )
    }

    fn geomean_of(all: Vec<Ratios>) -> Option<Ratios> {
        if all.is_empty() {
            return None;
        }
        let g = |f: fn(&Ratios) -> f64| geomean(all.iter().map(f));
        Some(Ratios {
            iops: g(|r| r.iops),
            mb_per_s: g(|r| r.mb_per_s),
            lat_p50: g(|r| r.lat_p50),
            lat_p99: g(|r| r.lat_p99),
            osd_cpu_per_op: g(|r| r.osd_cpu_per_op),
            osd_rss: g(|r| r.osd_rss),
        })
    }

    /// The raw reference's row for test `i`, if it ran.
    pub fn raw_row(&self, i: usize) -> Option<&RawRow> {
        match self.tests.get(i)?.raw.as_ref()? {
            RawCell::Row(r) => Some(r),
            _ => None,
        }
    }

    /// Group `g`'s row of test `i` as a share of the raw reference's.
    pub fn raw_share(&self, i: usize, g: usize) -> Option<RawShare> {
        let raw = self.raw_row(i)?;
        let row = self.tests.get(i)?.results.get(g)?.as_ref().ok()?;
        let r = |x: f64, y: f64| if y > 0.0 { x / y } else { f64::NAN };
        Some(RawShare {
            iops: r(row.m.iops, raw.m.iops),
            lat_p99: r(row.m.lat_p99_us, raw.m.lat_p99_us),
        })
    }

    /// The note of test `i` in the device ceiling table: the kinds that run at the device's pace
    /// ([`DEVICE_BOUND_SHARE`]) and the targets the device puts out of reach.
    pub fn raw_note(&self, i: usize) -> String {
        let mut n: Vec<String> = (0..self.groups.len())
            .filter_map(|g| {
                let sh = self.raw_share(i, g)?;
                (sh.iops >= DEVICE_BOUND_SHARE).then(|| {
                    format!(
                        "device-bound: {} at {:.0} % of raw IOPS",
                        self.groups[g].label,
                        sh.iops * 100.0
                    )
                })
            })
            .collect();
        if let Some(a) = self.attainable(i).map(|a| a.note()).filter(|x| !x.is_empty()) {
            n.push(a);
        }
        n.join("; ")
    }

    /// What the device leaves attainable for the second group against the first on test `i` (needs two
    /// groups, the raw reference and the first group's row).
    pub fn attainable(&self, i: usize) -> Option<Attainable> {
        if self.groups.len() < 2 {
            return None;
        }
        let raw = self.raw_row(i)?;
        let base = self.tests.get(i)?.results.first()?.as_ref().ok()?;
        let r = |x: f64, y: f64| if y > 0.0 { x / y } else { f64::NAN };
        Some(Attainable {
            iops_max: r(raw.m.iops, base.m.iops),
            lat_p99_min: r(raw.m.lat_p99_us, base.m.lat_p99_us),
        })
    }

    /// Geometric means of [`Report::attainable`] over the tests that have it (not over tests without a raw
    /// analogue: the device does not bound those).
    pub fn geomean_attainable(&self) -> Option<Attainable> {
        let all: Vec<Attainable> = (0..self.tests.len()).filter_map(|i| self.attainable(i)).collect();
        if all.is_empty() {
            return None;
        }
        Some(Attainable {
            iops_max: geomean(all.iter().map(|a| a.iops_max)),
            lat_p99_min: geomean(all.iter().map(|a| a.lat_p99_min)),
        })
    }

    /// The JSON document written to `result.json`.
    pub fn to_json(&self) -> Value {
        let m = &self.meta;
        let fin = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        let groups: Vec<Value> = self
            .groups
            .iter()
            .map(|g| {
                let (status, reason) = match &g.status {
                    GroupStatus::Ran => ("ran", Value::Null),
                    GroupStatus::Skipped(r) => ("skipped", json!(r)),
                };
                json!({
                    "label": g.label, "kind": g.kind, "device_class": g.device_class, "pool": g.pool,
                    "osd_ids": g.osd_ids, "status": status, "skip_reason": reason, "thread_sched": g.sched,
                })
            })
            .collect();
        let tests: Vec<Value> = self
            .tests
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut results = serde_json::Map::new();
                for (g, r) in self.groups.iter().zip(&t.results) {
                    let v = match r {
                        Ok(row) => json!({
                            "ops": row.m.ops,
                            "runtime_s": row.m.runtime_s,
                            "iops": row.m.iops,
                            "mb_per_s": row.m.mb_per_s,
                            "lat_p50_us": row.m.lat_p50_us,
                            "lat_p99_us": row.m.lat_p99_us,
                            "osd_cpu_us_per_op": row.osd_cpu_us_per_op,
                            "osd_rss_bytes": row.osd_rss_bytes,
                            "osd_ctxt_voluntary_per_op": row.osd_ctxt_vol_per_op,
                            "osd_ctxt_involuntary_per_op": row.osd_ctxt_invol_per_op,
                            "osd_busiest_thread": row.osd_busiest_thread.map(|(n, _)| n.as_str().to_string()),
                            "osd_busiest_thread_cpu_share": row.osd_busiest_thread.map(|(_, u)| u),
                            "client_cpu_us_per_op": row.client_cpu_us_per_op,
                            "machine_cpu_us_per_op": row.machine_cpu_us_per_op,
                            "osd_op_w_latency_ms": row.osd_lat.op_w_ms,
                            "osd_op_r_latency_ms": row.osd_lat.op_r_ms,
                            "osd_subop_w_latency_ms": row.osd_lat.subop_ms,
                            "osd_commit_latency_ms": row.osd_lat.commit_ms,
                            "osd_runq_wait_us_per_op": row.osd_wait_us_per_op(),
                            "osd_runq_wait_us_per_slice": fin(row.osd_sched.wait_us_per_slice()),
                            "osd_slices_per_op": row.osd_sched.slices as f64 / row.m.ops.max(1) as f64,
                            "reactor_runq_wait_us_per_slice": row.reactor_sched.map(|r| fin(r.wait_us_per_slice())),
                            "reactor_slices_per_op": row.reactor_sched.map(|r| r.slices as f64 / row.m.ops.max(1) as f64),
                            "device": row.device.map(|d| {
                                let per_op = |n: u64| n as f64 / row.m.ops.max(1) as f64;
                                let [r, w, f] = d.avg_ms();
                                json!({
                                    "reads_per_op": per_op(d.reads),
                                    "writes_per_op": per_op(d.writes),
                                    "flushes_per_op": per_op(d.flushes),
                                    "read_kib_per_op": per_op(d.read_sectors) / 2.0,
                                    "write_kib_per_op": per_op(d.write_sectors) / 2.0,
                                    "read_ms": r,
                                    "write_ms": w,
                                    "flush_ms": f,
                                })
                            }),
                            "settle": row.settle.map(|w| json!({ "waited_s": w.waited_s, "quiet": w.quiet })),
                        }),
                        Err(why) => json!({ "error": why }),
                    };
                    results.insert(g.label.clone(), v);
                }
                // Every round's headline numbers beside the medians.
                for (g, rounds) in self.groups.iter().zip(&t.rounds) {
                    let per: Vec<Value> = rounds
                        .iter()
                        .map(|r| match r {
                            Ok(row) => json!({
                                "iops": row.m.iops,
                                "lat_p50_us": row.m.lat_p50_us,
                                "lat_p99_us": row.m.lat_p99_us,
                                "osd_cpu_us_per_op": row.osd_cpu_us_per_op,
                                "osd_rss_bytes": row.osd_rss_bytes,
                                // What the disk did per op in this round (a read of fragmented data shows here).
                                "device_reads_per_op": row.device.map(|d| d.reads as f64 / row.m.ops.max(1) as f64),
                                "device_writes_per_op": row.device.map(|d| d.writes as f64 / row.m.ops.max(1) as f64),
                            }),
                            Err(why) => json!({ "error": why }),
                        })
                        .collect();
                    if let Some(Value::Object(o)) = results.get_mut(&g.label) {
                        o.insert("rounds".into(), Value::Array(per));
                    }
                }
                let round_ratios: Vec<Value> = (0..t.rounds.first().map_or(0, Vec::len))
                    .map(|k| self.round_ratios(i, k).map_or(Value::Null, Ratios::to_json))
                    .collect();
                let raw = match &t.raw {
                    None => Value::Null,
                    Some(RawCell::Row(r)) => json!({
                        "ops": r.m.ops,
                        "runtime_s": r.m.runtime_s,
                        "iops": r.m.iops,
                        "mb_per_s": r.m.mb_per_s,
                        "lat_p50_us": r.m.lat_p50_us,
                        "lat_p99_us": r.m.lat_p99_us,
                        "jobs": r.jobs,
                        "fio_cpu_us_per_op": r.fio_cpu_us_per_op,
                        "machine_cpu_us_per_op": r.machine_cpu_us_per_op,
                    }),
                    Some(RawCell::NotApplicable(why)) => json!({ "not_applicable": why }),
                    Some(RawCell::Failed(why)) => json!({ "error": why }),
                };
                let mut of_raw = serde_json::Map::new();
                for (gi, g) in self.groups.iter().enumerate() {
                    if let Some(sh) = self.raw_share(i, gi) {
                        of_raw.insert(g.label.clone(), json!({ "iops": fin(sh.iops), "lat_p99": fin(sh.lat_p99) }));
                    }
                }
                json!({
                    "id": t.id,
                    "title": t.title,
                    "results": results,
                    "ratio": self.ratios(i).map_or(Value::Null, Ratios::to_json),
                    "round_ratios": if round_ratios.is_empty() { Value::Null } else { Value::Array(round_ratios) },
                    "raw": raw,
                    "of_raw": if of_raw.is_empty() { Value::Null } else { Value::Object(of_raw) },
                    "attainable_ratio": self.attainable(i).map_or(Value::Null, Attainable::to_json),
                })
            })
            .collect();
        let ratio_of = match (self.groups.first(), self.groups.get(1)) {
            (Some(a), Some(b)) => json!(format!("{}/{}", b.label, a.label)),
            _ => Value::Null,
        };
        json!({
            "tool": "cargo xtask bench compare",
            "meta": {
                "date_utc": m.date_utc, "commit": m.commit, "machine": m.machine, "kernel": m.kernel,
                "cpu_idle": m.cpu_idle,
                "bluestore_profile": m.bluestore_profile, "disk_rotational": m.disk_rotational,
                "ceph_version": m.ceph_version, "fio_version": m.fio_version, "pool_size": m.pool_size,
                "osds_per_group": m.osds_per_group, "device_size_bytes": m.device_size_bytes,
                "device_files": m.device_files, "objects": m.objects, "object_size_bytes": crate::fio::OBJECT_SIZE_BYTES,
                "runtime_s": m.runtime_s, "rounds": m.rounds.max(1), "quick": m.quick, "ferro_shards": m.ferro_shards, "ferro_conf": m.ferro_conf,
                "load_average_start": m.load_start, "load_average_end": m.load_end,
                "cpu_steal_percent": m.cpu_steal_percent,
                "raw": m.raw.as_ref().map_or(Value::Null, |r| json!({
                    "engine": r.engine, "direct": true, "sync": "dsync", "files": r.files,
                    "file_size_bytes": r.file_size_bytes, "region_bytes": r.region_bytes, "prepared": r.prepared,
                })),
            },
            "groups": groups,
            "ratio_of": ratio_of,
            "tests": tests,
            "geomean_ratio": self.geomean_ratios().map_or(Value::Null, Ratios::to_json),
            "geomean_ratio_by_round": match self.rounds_kept() {
                0 => Value::Null,
                n => Value::Array((0..n).map(|k| self.round_geomean_ratios(k).map_or(Value::Null, Ratios::to_json)).collect()),
            },
            "geomean_attainable_ratio": self.geomean_attainable().map_or(Value::Null, Attainable::to_json),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// 2 s of 4 KiB ops at `iops`.
    fn measured(iops: f64, lat_p50_us: f64, lat_p99_us: f64) -> Measurement {
        Measurement {
            ops: (iops * 2.0) as u64,
            runtime_s: 2.0,
            iops,
            mb_per_s: iops * 4096.0 / 1e6,
            lat_p50_us,
            lat_p99_us,
        }
    }

    pub(crate) fn row(iops: f64, cpu: f64) -> Row {
        Row {
            m: measured(iops, 1e6 / iops, 4e6 / iops),
            osd_cpu_us_per_op: cpu,
            osd_rss_bytes: 100 << 20,
            osd_ctxt_vol_per_op: 2.0,
            osd_ctxt_invol_per_op: 0.5,
            osd_busiest_thread: Some((ThreadName::new("ferro-core-0"), 0.42)),
            client_cpu_us_per_op: 33.0,
            machine_cpu_us_per_op: 150.0,
            osd_lat: crate::osdperf::OsdLatency {
                op_w_ms: Some(2.0),
                op_r_ms: Some(0.5),
                subop_ms: None,
                commit_ms: Some(1.0),
            },
            osd_sched: crate::procstat::SchedStat {
                run_ns: 1_000_000,
                wait_ns: 3_000_000,
                slices: 1000,
            },
            reactor_sched: Some(crate::procstat::SchedStat {
                run_ns: 900_000,
                wait_ns: 1_000_000,
                slices: 500,
            }),
            device: Some(crate::diskstat::DiskStat {
                reads: 0,
                read_ms: 0,
                writes: 8000,
                write_ms: 4000,
                read_sectors: 0,
                write_sectors: 64_000,
                flushes: 4000,
                flush_ms: 2000,
                in_flight: 0,
            }),
            settle: Some(crate::diskstat::Settle {
                waited_s: 1.5,
                quiet: true,
            }),
        }
    }

    pub(crate) fn sample_report(second: Result<(), String>) -> Report {
        let g = |label: &str, status| GroupReport {
            label: label.into(),
            kind: label.into(),
            device_class: label.into(),
            pool: format!("bench-{label}"),
            osd_ids: vec![0],
            status,
            sched: "SCHED_OTHER nice 0 slice 1400 µs (×1)".into(),
        };
        let skipped = second.clone().err();
        let groups = vec![
            g("bluestore", GroupStatus::Ran),
            g(
                "ferro",
                skipped.clone().map_or(GroupStatus::Ran, GroupStatus::Skipped),
            ),
        ];
        let t = |id: &str, a: f64, b: f64| TestReport {
            id: id.into(),
            title: id.into(),
            results: vec![
                Ok(row(a, 50.0)),
                match &skipped {
                    None => Ok(row(b, 25.0)),
                    Some(why) => Err(why.clone()),
                },
            ],
            raw: None,
            rounds: Vec::new(),
        };
        Report {
            meta: Meta {
                date_utc: "2026-11-30 11:00 UTC".into(),
                commit: "abc1234".into(),
                pool_size: 1,
                osds_per_group: 1,
                cpu_idle: "cpuidle driver haltpoll, governor haltpoll, guest_halt_poll_ns 0".into(),
                cpu_steal_percent: Some(12.5),
                ..Meta::default()
            },
            groups,
            tests: vec![
                t("4k-randread-qd16", 1000.0, 2000.0),
                t("4k-randwrite-qd1", 400.0, 200.0),
            ],
        }
    }

    pub(crate) fn raw_row(iops: f64, p99_us: f64) -> RawRow {
        RawRow {
            m: measured(iops, p99_us / 4.0, p99_us),
            jobs: 1,
            fio_cpu_us_per_op: 12.5,
            machine_cpu_us_per_op: 20.0,
        }
    }

    /// [`sample_report`] with the raw reference: test 0 device-bound (raw 1500 IOPS against BlueStore's 1000,
    /// p99 3000 µs against 4000), test 1 far from it (raw 4000 IOPS, p99 1000 µs against 400 IOPS, 10 ms), and
    /// an OMAP test that has no raw analogue.
    pub(crate) fn sample_report_with_raw() -> Report {
        let mut r = sample_report(Ok(()));
        r.meta.raw = Some(RawSetup {
            engine: "io_uring".into(),
            files: 1,
            file_size_bytes: 4 << 30,
            region_bytes: 1 << 30,
            prepared: "zero-filled".into(),
        });
        r.tests[0].raw = Some(RawCell::Row(raw_row(1500.0, 3000.0)));
        r.tests[1].raw = Some(RawCell::Row(raw_row(4000.0, 1000.0)));
        r.tests.push(TestReport {
            id: "omap-set-qd1".into(),
            title: "omap-set-qd1".into(),
            results: vec![Ok(row(500.0, 50.0)), Ok(row(1000.0, 25.0))],
            raw: Some(RawCell::NotApplicable("no raw analogue".into())),
            rounds: Vec::new(),
        });
        r
    }

    #[test]
    fn raw_shares_and_what_the_device_leaves_attainable() {
        let r = sample_report_with_raw();
        let a = r.attainable(0).unwrap();
        assert!(
            (a.iops_max - 1.5).abs() < 1e-12 && (a.lat_p99_min - 0.75).abs() < 1e-12,
            "{a:?}"
        );
        assert_eq!(
            a.note(),
            "2× IOPS out of reach (≤ 1.50×); 0.4× p99 out of reach (≥ 0.75×)"
        );
        let b = r.attainable(1).unwrap();
        assert!(
            (b.iops_max - 10.0).abs() < 1e-12 && (b.lat_p99_min - 0.1).abs() < 1e-12,
            "{b:?}"
        );
        assert_eq!(b.note(), "");
        assert!(r.attainable(2).is_none(), "OMAP has no ceiling");
        // ferro gets 133 % of raw's IOPS on test 0, BlueStore 67 %: only ferro is device-bound there.
        assert_eq!(
            r.raw_note(0),
            "device-bound: ferro at 133 % of raw IOPS; 2× IOPS out of reach (≤ 1.50×); 0.4× p99 out of reach (≥ 0.75×)"
        );
        assert_eq!(r.raw_note(1), "");
        assert_eq!(r.raw_note(2), "");
        let g = r.geomean_attainable().unwrap();
        assert!((g.iops_max - 15f64.sqrt()).abs() < 1e-12, "{g:?}");
        assert!((g.lat_p99_min - 0.075f64.sqrt()).abs() < 1e-12, "{g:?}");
        // ferro: 2000 IOPS, p99 2000 µs against raw 1500 IOPS, 3000 µs.
        let f = r.raw_share(0, 1).unwrap();
        assert!((f.iops - 2000.0 / 1500.0).abs() < 1e-12 && (f.lat_p99 - 2000.0 / 3000.0).abs() < 1e-12);
        let bs = r.raw_share(1, 0).unwrap();
        assert!(
            (bs.iops - 0.1).abs() < 1e-12 && (bs.lat_p99 - 10.0).abs() < 1e-12,
            "{bs:?}"
        );
        assert!(r.raw_share(2, 0).is_none());
        // The existing ratios keep their meaning: the OMAP row counts in the geomean as before.
        assert_eq!(r.geomean_ratios().unwrap().iops, geomean([2.0, 0.5, 2.0]));

        let j = r.to_json();
        assert_eq!(j["meta"]["raw"]["engine"], "io_uring");
        assert_eq!(j["meta"]["raw"]["sync"], "dsync");
        assert_eq!(j["meta"]["raw"]["region_bytes"], 1u64 << 30);
        let t0 = &j["tests"][0];
        assert_eq!(t0["raw"]["iops"], 1500.0);
        assert_eq!(t0["raw"]["lat_p99_us"], 3000.0);
        assert_eq!(t0["raw"]["fio_cpu_us_per_op"], 12.5);
        assert_eq!(t0["of_raw"]["bluestore"]["iops"], 1000.0 / 1500.0);
        assert_eq!(t0["attainable_ratio"]["iops_max"], 1.5);
        assert_eq!(t0["results"]["ferro"]["iops"], 2000.0);
        assert_eq!(t0["ratio"]["iops"], 2.0);
        let omap = &j["tests"][2];
        assert_eq!(omap["raw"]["not_applicable"], "no raw analogue");
        assert!(omap["raw"].get("iops").is_none(), "never a zero: {omap}");
        assert!(omap["of_raw"].is_null() && omap["attainable_ratio"].is_null());
        assert!((j["geomean_attainable_ratio"]["iops_max"].as_f64().unwrap() - 15f64.sqrt()).abs() < 1e-12);
        // A run without the raw kind says so with nulls.
        let j = sample_report(Ok(())).to_json();
        assert!(j["meta"]["raw"].is_null() && j["tests"][0]["raw"].is_null());
        assert!(j["geomean_attainable_ratio"].is_null());
    }

    #[test]
    fn geomean_basics() {
        assert!((geomean([2.0, 8.0]) - 4.0).abs() < 1e-12);
        assert!((geomean([2.0, f64::NAN, 0.0, 8.0]) - 4.0).abs() < 1e-12);
        assert!(geomean([]).is_nan());
    }

    #[test]
    fn ratios_are_second_over_first_with_geomean() {
        let r = sample_report(Ok(()));
        let a = r.ratios(0).unwrap();
        assert!((a.iops - 2.0).abs() < 1e-12);
        assert!((a.lat_p50 - 0.5).abs() < 1e-12);
        assert!((a.osd_cpu_per_op - 0.5).abs() < 1e-12);
        let g = r.geomean_ratios().unwrap();
        assert!((g.iops - 1.0).abs() < 1e-12, "sqrt(2 * 0.5)");
        assert!((g.osd_cpu_per_op - 0.5).abs() < 1e-12);
        let j = r.to_json();
        assert_eq!(j["ratio_of"], "ferro/bluestore");
        assert_eq!(j["tests"][0]["results"]["ferro"]["iops"], 2000.0);
        assert_eq!(j["tests"][1]["ratio"]["iops"], 0.5);
        assert_eq!(j["groups"][1]["status"], "ran");
        assert_eq!(j["meta"]["cpu_steal_percent"], 12.5);
        assert_eq!(
            j["meta"]["cpu_idle"],
            "cpuidle driver haltpoll, governor haltpoll, guest_halt_poll_ns 0"
        );
        assert_eq!(
            j["groups"][1]["thread_sched"],
            "SCHED_OTHER nice 0 slice 1400 µs (×1)"
        );
        let f = &j["tests"][0]["results"]["ferro"];
        assert_eq!(f["osd_runq_wait_us_per_slice"], 3.0);
        assert_eq!(f["reactor_runq_wait_us_per_slice"], 2.0);
        assert_eq!(f["osd_runq_wait_us_per_op"], 3000.0 / 4000.0);
        let d = &f["device"];
        assert_eq!((&d["writes_per_op"], &d["write_ms"]), (&json!(2.0), &json!(0.5)));
        assert_eq!((&d["flushes_per_op"], &d["flush_ms"]), (&json!(1.0), &json!(0.5)));
        // 64,000 sectors over 4,000 ops: 8 KiB written per op.
        assert_eq!(
            (&d["write_kib_per_op"], &d["read_kib_per_op"]),
            (&json!(8.0), &json!(0.0))
        );
        assert_eq!((&d["reads_per_op"], &d["read_ms"]), (&json!(0.0), &Value::Null));
        assert_eq!(f["settle"], json!({ "waited_s": 1.5, "quiet": true }));
    }

    #[test]
    fn a_skipped_group_has_no_numbers_and_no_ratios() {
        let r = sample_report(Err("ferro-osd binary not found".into()));
        assert!(r.ratios(0).is_none());
        assert!(r.geomean_ratios().is_none());
        let j = r.to_json();
        assert_eq!(j["groups"][1]["status"], "skipped");
        assert_eq!(j["groups"][1]["skip_reason"], "ferro-osd binary not found");
        assert!(j["tests"][0]["results"]["ferro"].get("iops").is_none());
        assert_eq!(
            j["tests"][0]["results"]["ferro"]["error"],
            "ferro-osd binary not found"
        );
        assert!(j["geomean_ratio"].is_null());
        assert!(j["tests"][0]["results"]["bluestore"]["iops"].as_f64().unwrap() > 0.0);
    }
}
