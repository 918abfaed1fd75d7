// SPDX-License-Identifier: LGPL-3.0-or-later
//! The driver: starts the cluster, boots each group's OSDs, gives each group a device class, a CRUSH rule
//! and a pool, prefills, then runs every test against every group (alternating which group goes first) while
//! sampling the group's OSD processes and the disk under them, and last the raw reference, if asked for.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use testcluster::{ClassicOsd, Cluster, ClusterSpec, FerroOsd, OsdLauncher};

use crate::error::{BenchError, Result, io_err};
use crate::fio::{FioJob, OBJECT_SIZE_BYTES, job_file, parse_fio_json};
use crate::matrix::{TestDef, Workload};
use crate::omap::{OMAP_SCRIPT, parse_omap_json};
use crate::procstat::ProcSample;
use crate::raw::{RAW_ENGINE, RawJob, parse_raw_fio, raw_job_file, raw_jobs};
use crate::report::{GroupReport, GroupStatus, Meta, RawCell, RawSetup, Report, Row, TestReport};
use crate::util;

/// The interpreter that has the distribution's `rados` module (a pyenv `python3` on PATH may not).
const PYTHON: &str = "/usr/bin/python3";
/// Bound on a group's pool becoming active+clean (quick mode: shorter, to stay within its time budget
/// when a kind cannot serve the pool).
const CLEAN_TIMEOUT: Duration = Duration::from_secs(120);
const CLEAN_TIMEOUT_QUICK: Duration = Duration::from_secs(40);
/// Slack on top of a test's runtime before its client is killed.
const CLIENT_SLACK: Duration = Duration::from_secs(90);

/// Which OSD daemon a group runs.
#[derive(Debug, Clone)]
pub enum OsdKind {
    /// Ceph's `ceph-osd` with BlueStore on a sparse file.
    Classic,
    /// FerroCeph's `ferro-osd`.
    Ferro {
        /// The binary (a release build for real numbers).
        binary: PathBuf,
        /// ferrostore shards per OSD.
        shards: u32,
        /// Configuration options given to every ferro-osd of the group (`--key=value`).
        conf: Vec<(String, String)>,
    },
}

impl OsdKind {
    fn name(&self) -> &'static str {
        match self {
            OsdKind::Classic => "classic",
            OsdKind::Ferro { .. } => "ferro",
        }
    }
}

/// One group of OSDs.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// Label, also its device class and pool suffix (`bluestore` → class `bluestore`, pool
    /// `bench-bluestore`). Letters, digits and `-` only.
    pub label: String,
    /// Its daemon.
    pub kind: OsdKind,
    /// Set when the caller already knows the group cannot run (e.g. building ferro-osd failed): it is
    /// reported as skipped with this reason.
    pub unavailable: Option<String>,
}

/// Everything [`run`] needs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The groups; the first is the baseline of every ratio. One or two.
    pub groups: Vec<GroupSpec>,
    /// OSDs per group (≥ pool size).
    pub osds_per_group: u32,
    /// Replicas per pool.
    pub pool_size: u32,
    /// Size of every OSD's device file.
    pub device_size_bytes: u64,
    /// Zero-fill every OSD's device file (both kinds alike) before its mkfs instead of leaving it sparse.
    pub zero_fill_devices: bool,
    /// Placement groups per pool.
    pub pg_num: u32,
    /// 4 MiB objects per pool.
    pub objects: u32,
    /// OMAP keys per OMAP object in the prefill.
    pub omap_keys: u32,
    /// Seconds per test and group.
    pub runtime_s: u32,
    /// The settings profile of the classic OSDs.
    pub bluestore_profile: BlueStoreProfile,
    /// Rounds of the whole matrix (≥ 1): each test runs this many times on each group, and the report gives
    /// the medians ([`crate::rounds`]).
    pub rounds: u32,
    /// Tests to run, in order.
    pub tests: Vec<TestDef>,
    /// Quick (smoke test) mode, recorded in the report. At pool size 1 it also starts no mgr and so does not
    /// wait for active+clean PGs (that state comes from the mgr): the untimed prefill waits for them instead.
    pub quick: bool,
    /// Workspace root (for the commit id).
    pub workspace: PathBuf,
    /// Also run the raw reference (module `raw`): every fio test straight on files of the device size, in the
    /// cluster directory, one per replica.
    pub raw: bool,
}

/// Which of their two settings profiles classic OSDs run with. BlueStore and ceph-osd choose by the device's
/// rotational flag; a virtio disk or a file on one often says "rotational" whatever is behind it, and then
/// BlueStore runs as on a hard disk: overwrites under 64 KiB deferred (written to its WAL, then in place), an IO
/// throttle cost of 670,000 bytes per IO instead of 4,000. ferro-osd has one design for flash whatever the flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BlueStoreProfile {
    /// What the device's flag says (Ceph's default).
    #[default]
    Auto,
    /// `bluestore debug enforce settings = ssd`, as Ceph's own benchmarks do on misdetected flash.
    Ssd,
    /// `bluestore debug enforce settings = hdd`.
    Hdd,
}

impl BlueStoreProfile {
    /// The option's name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            BlueStoreProfile::Auto => "auto",
            BlueStoreProfile::Ssd => "ssd",
            BlueStoreProfile::Hdd => "hdd",
        }
    }

    /// The `[osd]` lines it adds to ceph.conf (before any OSD's mkfs: BlueStore fixes its allocation unit there).
    /// ferro-osd ignores them.
    pub fn conf(self) -> Option<(&'static str, &'static str)> {
        match self {
            BlueStoreProfile::Auto => None,
            BlueStoreProfile::Ssd => Some(("bluestore debug enforce settings", "ssd")),
            BlueStoreProfile::Hdd => Some(("bluestore debug enforce settings", "hdd")),
        }
    }
}

struct LiveGroup {
    report: GroupReport,
    pids: Vec<u32>,
}

fn valid_label(l: &str) -> bool {
    !l.is_empty() && l.len() <= 32 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

fn check_options(o: &RunOptions) -> Result<()> {
    if o.groups.is_empty() || o.groups.len() > 2 {
        return Err(BenchError::Usage("one or two OSD groups".into()));
    }
    for g in &o.groups {
        if !valid_label(&g.label) {
            return Err(BenchError::Usage(format!("bad group label {:?}", g.label)));
        }
    }
    if o.groups.len() == 2 && o.groups[0].label == o.groups[1].label {
        return Err(BenchError::Usage("group labels must differ".into()));
    }
    if o.pool_size == 0 || o.pool_size > o.osds_per_group {
        return Err(BenchError::Usage(format!(
            "pool size {} needs at least that many OSDs per group (have {})",
            o.pool_size, o.osds_per_group
        )));
    }
    if o.objects == 0 || o.runtime_s == 0 || o.tests.is_empty() || o.omap_keys < 2 {
        return Err(BenchError::Usage(
            "objects, runtime, OMAP keys (≥ 2) and the test list must not be empty".into(),
        ));
    }
    if !o.pg_num.is_power_of_two() {
        return Err(BenchError::Usage("pg_num must be a power of two".into()));
    }
    Ok(())
}

fn python_rados() -> Option<String> {
    match util::run(
        Command::new(PYTHON).args(["-c", "import rados"]),
        Duration::from_secs(30),
    ) {
        Ok(_) => None,
        Err(e) => Some(format!("python3-rados not usable via {PYTHON}: {e}")),
    }
}

fn first_lines(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join("\n")
}

/// Runs the whole comparison. Errors only for problems that invalidate the whole run (bad options, the
/// cluster or the baseline group failing to start); a group that cannot start is skipped, a test that fails
/// is recorded as an error in its cell.
pub fn run(o: &RunOptions) -> Result<Report> {
    check_options(o)?;
    if testcluster::which("fio").is_none() {
        return Err(BenchError::Missing("fio".into()));
    }
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let steal_start = crate::procstat::steal_ticks();
    let meta = Meta {
        date_utc: util::utc_string(started),
        commit: util::commit(&o.workspace),
        machine: util::machine(),
        kernel: util::kernel(),
        cpu_idle: crate::idle::describe(),
        bluestore_profile: o.bluestore_profile.name().into(),
        disk_rotational: None,
        load_start: util::load_average(),
        load_end: String::new(),
        cpu_steal_percent: None,
        ceph_version: util::first_line("ceph", &["--version"]),
        fio_version: util::first_line("fio", &["--version"]),
        pool_size: o.pool_size,
        osds_per_group: o.osds_per_group,
        device_size_bytes: o.device_size_bytes,
        device_files: if o.zero_fill_devices {
            "zero-filled"
        } else {
            "sparse"
        }
        .into(),
        objects: o.objects,
        runtime_s: o.runtime_s,
        rounds: o.rounds.max(1),
        quick: o.quick,
        ferro_shards: o.groups.iter().find_map(|g| match &g.kind {
            OsdKind::Ferro { shards, .. } => Some(*shards),
            OsdKind::Classic => None,
        }),
        ferro_conf: o
            .groups
            .iter()
            .find_map(|g| match &g.kind {
                OsdKind::Ferro { conf, .. } => Some(conf.iter().map(|(k, v)| format!("{k}={v}")).collect()),
                OsdKind::Classic => None,
            })
            .unwrap_or_default(),
        raw: o.raw.then(|| RawSetup {
            engine: RAW_ENGINE.into(),
            files: o.pool_size,
            file_size_bytes: o.device_size_bytes,
            region_bytes: raw_region_bytes(o),
            prepared: if o.zero_fill_devices {
                "zero-filled"
            } else {
                "data-set-zero-filled"
            }
            .into(),
        }),
    };
    let omap_unavailable = if o.tests.iter().any(|t| matches!(t.workload, Workload::Omap(_))) {
        python_rados()
    } else {
        None
    };

    let t0 = Instant::now();
    let spec = ClusterSpec {
        classic_osds: 0,
        mgr: mgr_needed(o),
        osd_block_size_bytes: o.device_size_bytes,
        ..ClusterSpec::default()
    }
    .conf("global", "mon allow pool size one", "true");
    let spec = match o.bluestore_profile.conf() {
        Some((k, v)) => spec.conf("osd", k, v),
        None => spec,
    };
    let c = Cluster::start(spec)?;
    let mut meta = meta;
    meta.disk_rotational = crate::diskstat::rotational_for(c.dir());
    eprintln!("bench compare: cluster at {}", c.dir().display());

    let mut groups = Vec::new();
    for (gi, g) in o.groups.iter().enumerate() {
        let lg = start_group(&c, o, g);
        if gi == 0
            && let GroupStatus::Skipped(why) = &lg.report.status
        {
            return Err(BenchError::Usage(format!(
                "the baseline group {} could not start: {why}",
                g.label
            )));
        }
        groups.push(lg);
    }
    for lg in groups.iter_mut().filter(|g| g.report.status == GroupStatus::Ran) {
        if let Err(e) = make_pool(&c, o, &lg.report) {
            lg.report.status =
                GroupStatus::Skipped(format!("pool setup failed: {}", first_lines(&e.to_string(), 8)));
        }
    }
    let any_omap = o.tests.iter().any(|t| matches!(t.workload, Workload::Omap(_)));
    let script = c.dir().join("omap_bench.py");
    std::fs::write(&script, OMAP_SCRIPT).map_err(io_err("writing the OMAP script"))?;
    for (gi, lg) in groups.iter_mut().enumerate() {
        if lg.report.status != GroupStatus::Ran {
            continue;
        }
        let pf = Instant::now();
        let res = prefill(&c, o, &lg.report.pool).and_then(|()| {
            if any_omap && omap_unavailable.is_none() {
                omap_client(
                    &c,
                    &script,
                    &lg.report.pool,
                    "prep",
                    0,
                    o.omap_keys,
                    Duration::from_secs(300),
                )
                .map(|_| ())
            } else {
                Ok(())
            }
        });
        match res {
            Ok(()) => eprintln!(
                "bench compare: prefilled {} ({} × 4 MiB) in {:.1} s",
                lg.report.pool,
                o.objects,
                pf.elapsed().as_secs_f64()
            ),
            Err(e) if gi == 0 => return Err(e),
            Err(e) => {
                lg.report.status =
                    GroupStatus::Skipped(format!("prefill failed: {}", first_lines(&e.to_string(), 8)));
            }
        }
    }
    for lg in &groups {
        if let GroupStatus::Skipped(why) = &lg.report.status {
            eprintln!("bench compare: *** {} side SKIPPED: {why}", lg.report.label);
        }
    }
    let rounds = o.rounds.max(1) as usize;
    // rounds_of[test][group][round]
    let mut rounds_of: Vec<Vec<Vec<std::result::Result<Row, String>>>> =
        vec![vec![Vec::with_capacity(rounds); groups.len()]; o.tests.len()];
    for round in 0..rounds {
        if rounds > 1 {
            eprintln!("bench compare: round {} of {rounds}", round + 1);
        }
        for (ti, t) in o.tests.iter().enumerate() {
            let mut results: Vec<std::result::Result<Row, String>> =
                vec![Err("not run".into()); groups.len()];
            // Alternate which group goes first, so neither always runs on a machine warmed (or tired) by the other;
            // the next round swaps it again, so each test gets each order.
            let mut order: Vec<usize> = (0..groups.len()).collect();
            if (ti + round) % 2 == 1 {
                order.reverse();
            }
            for gi in order {
                let lg = &groups[gi];
                results[gi] = match &lg.report.status {
                    GroupStatus::Skipped(why) => {
                        Err(format!("group skipped: {}", why.lines().next().unwrap_or("")))
                    }
                    GroupStatus::Ran => {
                        let r = match (&t.workload, &omap_unavailable) {
                            (Workload::Omap(_), Some(why)) => Err(why.clone()),
                            _ => run_one(&c, o, t, lg, &script).map_err(|e| first_lines(&e.to_string(), 12)),
                        };
                        match &r {
                            Ok(row) => eprintln!(
                                "bench compare: {:<20} {:<10} {:>9.0} IOPS {:>8.1} MB/s p50 {:>8.0} µs p99 {:>8.0} µs CPU {:>7.1} µs/op RSS {} MiB",
                                t.id,
                                lg.report.label,
                                row.m.iops,
                                row.m.mb_per_s,
                                row.m.lat_p50_us,
                                row.m.lat_p99_us,
                                row.osd_cpu_us_per_op,
                                row.osd_rss_bytes >> 20
                            ),
                            Err(e) => eprintln!("bench compare: {} on {} FAILED: {e}", t.id, lg.report.label),
                        }
                        r
                    }
                };
            }
            for (gi, r) in results.into_iter().enumerate() {
                rounds_of[ti][gi].push(r);
            }
        }
    }
    let tests: Vec<TestReport> = o
        .tests
        .iter()
        .zip(rounds_of)
        .map(|(t, per_group)| TestReport {
            id: t.id.to_owned(),
            title: t.title.to_owned(),
            results: per_group.iter().map(|r| crate::rounds::combine(r)).collect(),
            raw: None,
            rounds: if rounds > 1 { per_group } else { Vec::new() },
        })
        .collect();
    let mut tests = tests;
    // The raw reference (its files' zero-fill, then its tests) runs after every group's tests, not between them:
    // its write rows drive the disk at its ceiling (seconds of random O_DSYNC writes) and the disk under a VM can
    // take a while to recover, so an OSD test right after one ran against a tired disk (runs 44–45 of
    // docs/benchmarks.md: the device's write service time 5–17× its usual during the group that followed raw in
    // 4K write QD16, which the alternating order always gave to the same group).
    let raw_files: Option<std::result::Result<Vec<PathBuf>, String>> = o.raw.then(|| {
        let t = Instant::now();
        let r = prepare_raw_files(&c.dir().join("raw"), o);
        match &r {
            Ok(files) => eprintln!(
                "bench compare: raw reference: {} file(s) of {} MiB ({}) in {:.1} s",
                files.len(),
                o.device_size_bytes >> 20,
                if o.zero_fill_devices {
                    "zero-filled"
                } else {
                    "data set zero-filled"
                },
                t.elapsed().as_secs_f64()
            ),
            Err(e) => eprintln!("bench compare: *** raw reference SKIPPED: {e}"),
        }
        r
    });
    if let Some(files) = &raw_files {
        for (t, rep) in o.tests.iter().zip(tests.iter_mut()) {
            rep.raw = Some(run_raw(&c, o, t, files));
        }
    }
    eprintln!("bench compare: done in {:.0} s", t0.elapsed().as_secs_f64());
    meta.load_end = util::load_average();
    meta.cpu_steal_percent = match (steal_start, crate::procstat::steal_ticks()) {
        (Some((s0, a0)), Some((s1, a1))) if a1 > a0 => Some((s1 - s0) as f64 * 100.0 / (a1 - a0) as f64),
        _ => None,
    };
    Ok(Report {
        meta,
        groups: groups.into_iter().map(|g| g.report).collect(),
        tests,
    })
}

/// Any kind of OSD whose device file (`<data dir>/block`, where both ceph-osd's BlueStore and ferro-osd put it)
/// is written full of zeros before the kind's own mkfs: both keep an existing file of the right size. On ext4 a
/// write into a never-written (sparse or fallocated) part of a file costs a journal commit when made durable, and
/// ferro-osd's log-structured store writes new places all the time: sparse files made its QD1 writes 2–5× slower
/// (docs/benchmarks.md). Both kinds get the same treatment.
struct ZeroFilled {
    inner: Box<dyn OsdLauncher>,
    bytes: u64,
}

impl OsdLauncher for ZeroFilled {
    fn kind(&self) -> &str {
        self.inner.kind()
    }

    fn prepare(&self, ctx: &testcluster::OsdContext) -> testcluster::Result<()> {
        let path = ctx.data_dir.join("block");
        let t = Instant::now();
        util::zero_fill(&path, self.bytes).map_err(|source| testcluster::ClusterError::Io {
            context: format!("zero-filling {}", path.display()),
            source,
        })?;
        eprintln!(
            "bench compare: osd.{} device file {} zero-filled ({} MiB in {:.1} s)",
            ctx.id,
            path.display(),
            self.bytes >> 20,
            t.elapsed().as_secs_f64()
        );
        self.inner.prepare(ctx)
    }

    fn command(&self, ctx: &testcluster::OsdContext) -> std::process::Command {
        self.inner.command(ctx)
    }

    fn up_timeout(&self) -> Duration {
        self.inner.up_timeout()
    }
}

fn start_group(c: &Cluster, o: &RunOptions, g: &GroupSpec) -> LiveGroup {
    let mut report = GroupReport {
        label: g.label.clone(),
        kind: g.kind.name().to_owned(),
        device_class: g.label.clone(),
        pool: format!("bench-{}", g.label),
        osd_ids: Vec::new(),
        status: GroupStatus::Ran,
        sched: String::new(),
    };
    if let Some(why) = &g.unavailable {
        report.status = GroupStatus::Skipped(why.clone());
        return LiveGroup {
            report,
            pids: Vec::new(),
        };
    }
    let launcher: Box<dyn OsdLauncher> = match &g.kind {
        OsdKind::Classic => Box::new(ClassicOsd),
        OsdKind::Ferro { binary, shards, conf } => {
            if !binary.is_file() {
                report.status =
                    GroupStatus::Skipped(format!("ferro-osd binary not found at {}", binary.display()));
                return LiveGroup {
                    report,
                    pids: Vec::new(),
                };
            }
            let mut f = FerroOsd::new(binary);
            f.device_size_bytes = o.device_size_bytes;
            f.shards = *shards;
            f.device_class = g.label.clone();
            f.extra_args
                .extend(conf.iter().map(|(k, v)| format!("--{k}={v}")));
            Box::new(f)
        }
    };
    let launcher: Box<dyn OsdLauncher> = if o.zero_fill_devices {
        Box::new(ZeroFilled {
            inner: launcher,
            bytes: o.device_size_bytes,
        })
    } else {
        launcher
    };
    let t = Instant::now();
    let res = (|| -> Result<()> {
        for _ in 0..o.osds_per_group {
            report.osd_ids.push(c.spawn_osd(launcher.as_ref())?);
        }
        for id in &report.osd_ids {
            c.wait_osd_up(*id, launcher.up_timeout())?;
        }
        if matches!(g.kind, OsdKind::Classic) {
            // ceph-osd picks hdd/ssd itself; replace it with the group's class.
            let names: Vec<String> = report.osd_ids.iter().map(|i| format!("osd.{i}")).collect();
            let mut rm = vec!["osd", "crush", "rm-device-class"];
            rm.extend(names.iter().map(String::as_str));
            c.ceph(&rm)?;
            let mut set = vec!["osd", "crush", "set-device-class", g.label.as_str()];
            set.extend(names.iter().map(String::as_str));
            c.ceph(&set)?;
        }
        Ok(())
    })();
    let pids = osd_pids(c, &report.osd_ids);
    match res {
        Ok(()) if pids.len() == report.osd_ids.len() => {
            report.sched = crate::procstat::thread_classes(
                &pids,
                if matches!(g.kind, OsdKind::Ferro { .. }) {
                    "ferro-core-"
                } else {
                    ""
                },
            );
            eprintln!("bench compare: {} thread scheduling: {}", g.label, report.sched);
            eprintln!(
                "bench compare: {} OSD(s) {:?} ({}) up in {:.1} s",
                g.label,
                report.osd_ids,
                g.kind.name(),
                t.elapsed().as_secs_f64()
            );
            LiveGroup { report, pids }
        }
        other => {
            let why = match other {
                Err(e) => first_lines(&e.to_string(), 12),
                Ok(()) => "an OSD process is missing".into(),
            };
            for id in &report.osd_ids {
                let _ = c.kill_daemon(&format!("osd.{id}"));
            }
            report.status = GroupStatus::Skipped(format!("{} OSDs failed to boot: {why}", g.kind.name()));
            LiveGroup {
                report,
                pids: Vec::new(),
            }
        }
    }
}

/// Bytes each raw job addresses: a pool's data set (`objects` × 4 MiB), within the file.
fn raw_region_bytes(o: &RunOptions) -> u64 {
    (u64::from(o.objects) * OBJECT_SIZE_BYTES).min(o.device_size_bytes)
}

/// One file per replica (`raw.0` ..), each of the device size, written full of zeros like the OSDs' device files
/// (without `zero_fill_devices`: only the data set, the rest left sparse; the tests touch nothing beyond it).
fn prepare_raw_files(dir: &std::path::Path, o: &RunOptions) -> std::result::Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    (0..o.pool_size.max(1))
        .map(|i| {
            let p = dir.join(format!("raw.{i}"));
            let fill = if o.zero_fill_devices {
                o.device_size_bytes
            } else {
                raw_region_bytes(o)
            };
            util::zero_fill(&p, fill)
                .and_then(|()| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&p)?
                        .set_len(o.device_size_bytes)
                })
                .map_err(|e| format!("zero-filling {}: {e}", p.display()))?;
            Ok(p)
        })
        .collect()
}

/// Test `t` on the raw files (OMAP tests have no raw analogue).
fn run_raw(
    c: &Cluster,
    o: &RunOptions,
    t: &TestDef,
    files: &std::result::Result<Vec<PathBuf>, String>,
) -> RawCell {
    let Workload::Fio {
        rw,
        bs_bytes,
        iodepth,
        rwmixread,
    } = t.workload
    else {
        return RawCell::NotApplicable("OMAP operations have no raw-device analogue".into());
    };
    let files = match files {
        Ok(f) => f,
        Err(why) => return RawCell::Failed(why.clone()),
    };
    let jobs = raw_jobs(rw, o.pool_size) as usize;
    let job = RawJob {
        files: files.iter().take(jobs).cloned().collect(),
        region_bytes: raw_region_bytes(o),
        rw: rw.into(),
        bs_bytes,
        iodepth,
        rwmixread,
        runtime_s: o.runtime_s,
    };
    settle_disk(crate::diskstat::stat_file_for(c.dir()).as_deref(), o, t, "raw");
    let res = (|| -> Result<crate::raw::RawRow> {
        let path = c.dir().join("tmp").join(format!("{}-raw.fio", t.id));
        std::fs::write(&path, raw_job_file(&job)).map_err(io_err(format!("writing {}", path.display())))?;
        let machine_before = crate::procstat::machine_busy_us();
        let out = util::run(
            Command::new("fio").arg("--output-format=json").arg(&path),
            Duration::from_secs(u64::from(o.runtime_s)) + CLIENT_SLACK,
        )?;
        let machine_us = (crate::procstat::machine_busy_us() - machine_before).max(0.0);
        let mut row = parse_raw_fio(&out.stdout, job.files.len() as u32)?;
        row.machine_cpu_us_per_op = machine_us / row.m.ops.max(1) as f64;
        Ok(row)
    })();
    match res {
        Ok(row) => {
            eprintln!(
                "bench compare: {:<20} {:<10} {:>9.0} IOPS {:>8.1} MB/s p50 {:>8.0} µs p99 {:>8.0} µs fio CPU {:>7.1} µs/op ({} job(s))",
                t.id,
                "raw",
                row.m.iops,
                row.m.mb_per_s,
                row.m.lat_p50_us,
                row.m.lat_p99_us,
                row.fio_cpu_us_per_op,
                row.jobs
            );
            RawCell::Row(row)
        }
        Err(e) => {
            eprintln!("bench compare: {} on raw FAILED: {e}", t.id);
            RawCell::Failed(first_lines(&e.to_string(), 12))
        }
    }
}

/// Wait for the disk under the cluster to go quiet before test `t` on `label` ([`crate::diskstat::settle`]). Not
/// in quick mode: it checks that the tool runs, and the waits would only make CI slower.
fn settle_disk(
    stat_file: Option<&std::path::Path>,
    o: &RunOptions,
    t: &TestDef,
    label: &str,
) -> Option<crate::diskstat::Settle> {
    let w = crate::diskstat::settle(stat_file.filter(|_| !o.quick)?)?;
    if !w.quiet {
        eprintln!(
            "bench compare: {} on {label}: the disk did not go quiet in {:.0} s; running anyway",
            t.id, w.waited_s
        );
    }
    Some(w)
}

fn osd_pids(c: &Cluster, ids: &[u32]) -> Vec<u32> {
    let ds = c.daemons();
    ids.iter()
        .filter_map(|id| {
            let name = format!("osd.{id}");
            ds.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
        })
        .collect()
}

fn make_pool(c: &Cluster, o: &RunOptions, g: &GroupReport) -> Result<()> {
    let rule = g.pool.as_str();
    c.ceph(&[
        "osd",
        "crush",
        "rule",
        "create-replicated",
        rule,
        "default",
        "osd",
        &g.device_class,
    ])?;
    let pg = o.pg_num.to_string();
    // The size is given at creation, never changed afterwards: an OSD that opened its PGs at size 1 and
    // ignored a later size change would otherwise serve a "size 3" pool without replicating.
    let size = o.pool_size.to_string();
    c.ceph(&[
        "osd",
        "pool",
        "create",
        &g.pool,
        &pg,
        &pg,
        "replicated",
        rule,
        "--size",
        &size,
    ])?;
    let min = (o.pool_size - o.pool_size / 2).to_string();
    c.ceph(&["osd", "pool", "set", &g.pool, "min_size", &min])?;
    c.ceph(&["osd", "pool", "application", "enable", &g.pool, "rados"])?;
    if !mgr_needed(o) {
        // Quick mode at size 1 runs without a mgr (no PG states): the untimed prefill waits for the PGs.
        return Ok(());
    }
    let what = format!("pool {} active+clean with {} replicas", g.pool, o.pool_size);
    // A wrong acting set is final (it ends the wait at once), not "not yet".
    let bound = if o.quick {
        CLEAN_TIMEOUT_QUICK
    } else {
        CLEAN_TIMEOUT
    };
    let verdict = c.wait_for(&what, bound, || {
        let v = c.ceph_json(&["pg", "ls-by-pool", &g.pool])?;
        Ok(match pgs_ready(&v, o.pg_num, o.pool_size) {
            Ok(Some(())) => Some(Ok(())),
            Ok(None) => None,
            Err(why) => Some(Err(why)),
        })
    })?;
    verdict.map_err(|why| crate::error::bad("ceph pg ls-by-pool", why))?;
    Ok(())
}

/// A mgr is needed for PG states: always except in quick mode at pool size 1.
fn mgr_needed(o: &RunOptions) -> bool {
    !o.quick || o.pool_size > 1
}

/// From `ceph pg ls-by-pool --format=json`: `Ok(Some(()))` when all `pg_num` PGs are active+clean with
/// `size` OSDs in their acting set, `Ok(None)` while not yet, `Err` when a PG claims active+clean with a
/// smaller acting set (its primary is not replicating; the numbers would not be comparable).
fn pgs_ready(v: &serde_json::Value, pg_num: u32, size: u32) -> std::result::Result<Option<()>, String> {
    let Some(stats) = v["pg_stats"].as_array().or_else(|| v.as_array()) else {
        return Ok(None);
    };
    let mut clean = 0u32;
    for p in stats {
        if p["state"] != "active+clean" {
            continue;
        }
        let acting = p["acting"].as_array().map_or(0, Vec::len);
        if acting != size as usize {
            return Err(format!(
                "PG {} reports active+clean with {acting} of {size} replicas in its acting set",
                p["pgid"].as_str().unwrap_or("?")
            ));
        }
        clean += 1;
    }
    Ok((clean == pg_num && stats.len() == pg_num as usize).then_some(()))
}

fn fio(c: &Cluster, job: &FioJob, tag: &str, timeout: Duration) -> Result<crate::report::Measurement> {
    let path = c.dir().join("tmp").join(format!("{tag}.fio"));
    std::fs::write(&path, job_file(job)).map_err(io_err(format!("writing {}", path.display())))?;
    let out = util::run(
        Command::new("fio")
            .arg("--output-format=json")
            .arg(&path)
            .env("CEPH_CONF", c.conf_path()),
        timeout,
    )?;
    parse_fio_json(&out.stdout).map_err(|e| match out.stderr.trim() {
        "" => e,
        err => crate::error::bad("fio", format!("{e}; stderr: {}", first_lines(err, 5))),
    })
}

fn prefill(c: &Cluster, o: &RunOptions, pool: &str) -> Result<()> {
    let job = FioJob {
        conf: c.conf_path(),
        pool: pool.to_owned(),
        rw: "write".into(),
        bs_bytes: OBJECT_SIZE_BYTES,
        iodepth: 8,
        rwmixread: None,
        objects: o.objects,
        runtime_s: None,
    };
    // Even at 5 MB/s every object is written well within this.
    let bound = Duration::from_secs(120 + u64::from(o.objects) * OBJECT_SIZE_BYTES / 5_000_000);
    let m = fio(c, &job, &format!("prefill-{pool}"), bound)?;
    if m.ops < u64::from(o.objects) {
        return Err(crate::error::bad(
            "fio",
            format!("prefill wrote {} of {} objects", m.ops, o.objects),
        ));
    }
    Ok(())
}

fn omap_client(
    c: &Cluster,
    script: &std::path::Path,
    pool: &str,
    mode: &str,
    seconds: u32,
    keys: u32,
    timeout: Duration,
) -> Result<String> {
    let out = util::run(
        Command::new(PYTHON).arg(script).arg(c.conf_path()).args([
            pool,
            mode,
            &seconds.to_string(),
            &keys.to_string(),
        ]),
        timeout,
    )?;
    Ok(out.stdout)
}

fn run_one(c: &Cluster, o: &RunOptions, t: &TestDef, g: &LiveGroup, script: &std::path::Path) -> Result<Row> {
    let timeout = Duration::from_secs(u64::from(o.runtime_s)) + CLIENT_SLACK;
    let disk = crate::diskstat::stat_file_for(c.dir());
    let settle = settle_disk(disk.as_deref(), o, t, &g.report.label);
    let lat_before = crate::osdperf::sample(c.dir(), &g.report.osd_ids);
    let before = ProcSample::take(&g.pids)?;
    let wall = Instant::now();
    let client_before = crate::procstat::children_cpu_us();
    let machine_before = crate::procstat::machine_busy_us();
    let disk_before = disk.as_deref().and_then(crate::diskstat::sample);
    let m = match t.workload {
        Workload::Fio {
            rw,
            bs_bytes,
            iodepth,
            rwmixread,
        } => {
            let job = FioJob {
                conf: c.conf_path(),
                pool: g.report.pool.clone(),
                rw: rw.into(),
                bs_bytes,
                iodepth,
                rwmixread,
                objects: o.objects,
                runtime_s: Some(o.runtime_s),
            };
            fio(c, &job, &format!("{}-{}", t.id, g.report.label), timeout)?
        }
        Workload::Omap(op) => parse_omap_json(&omap_client(
            c,
            script,
            &g.report.pool,
            op.mode(),
            o.runtime_s,
            o.omap_keys,
            timeout,
        )?)?,
    };
    let client_cpu_us = (crate::procstat::children_cpu_us() - client_before).max(0.0);
    let machine_cpu_us = (crate::procstat::machine_busy_us() - machine_before).max(0.0);
    let disk_after = disk.as_deref().and_then(crate::diskstat::sample);
    let after = ProcSample::take(&g.pids)?;
    let busiest = crate::procstat::busiest_thread(&before, &after, wall.elapsed().as_secs_f64());
    let lat_after = crate::osdperf::sample(c.dir(), &g.report.osd_ids);
    let per_op = |a: u64, b: u64| a.saturating_sub(b) as f64 / m.ops.max(1) as f64;
    Ok(Row {
        osd_cpu_us_per_op: (after.cpu_us - before.cpu_us).max(0.0) / m.ops.max(1) as f64,
        osd_ctxt_vol_per_op: per_op(after.ctxt_voluntary, before.ctxt_voluntary),
        osd_ctxt_invol_per_op: per_op(after.ctxt_involuntary, before.ctxt_involuntary),
        osd_busiest_thread: busiest.map(|(n, u)| (crate::report::ThreadName::new(&n), u)),
        client_cpu_us_per_op: client_cpu_us / m.ops.max(1) as f64,
        machine_cpu_us_per_op: machine_cpu_us / m.ops.max(1) as f64,
        osd_rss_bytes: after.rss_bytes,
        osd_lat: crate::osdperf::latency(&lat_before, &lat_after),
        osd_sched: crate::procstat::sched_delta(&before, &after, ""),
        reactor_sched: g
            .report
            .kind
            .eq("ferro")
            .then(|| crate::procstat::sched_delta(&before, &after, "ferro-core-")),
        device: disk_before.zip(disk_after).map(|(b, a)| a.since(&b)),
        settle,
        m,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::MATRIX;

    fn opts() -> RunOptions {
        RunOptions {
            groups: vec![
                GroupSpec {
                    label: "bluestore".into(),
                    kind: OsdKind::Classic,
                    unavailable: None,
                },
                GroupSpec {
                    label: "ferro".into(),
                    kind: OsdKind::Classic,
                    unavailable: None,
                },
            ],
            osds_per_group: 1,
            pool_size: 1,
            device_size_bytes: 1 << 30,
            zero_fill_devices: false,
            pg_num: 8,
            objects: 4,
            omap_keys: 16,
            runtime_s: 1,
            rounds: 1,
            bluestore_profile: BlueStoreProfile::Auto,
            tests: MATRIX.to_vec(),
            quick: true,
            workspace: ".".into(),
            raw: true,
        }
    }

    #[test]
    fn pg_readiness_checks_the_acting_set() {
        let pg = |id: &str, state: &str, acting: &[u32]| serde_json::json!({"pgid": id, "state": state, "acting": acting});
        let v = |pgs: Vec<serde_json::Value>| serde_json::json!({"pg_ready": true, "pg_stats": pgs});
        let all = v(vec![
            pg("1.0", "active+clean", &[0, 1, 2]),
            pg("1.1", "active+clean", &[1, 2, 0]),
        ]);
        assert_eq!(pgs_ready(&all, 2, 3), Ok(Some(())));
        let peering = v(vec![
            pg("1.0", "active+clean", &[0, 1, 2]),
            pg("1.1", "peering", &[1]),
        ]);
        assert_eq!(pgs_ready(&peering, 2, 3), Ok(None));
        let missing = v(vec![pg("1.0", "active+clean", &[0, 1, 2])]);
        assert_eq!(pgs_ready(&missing, 2, 3), Ok(None));
        // What a primary that ignores replication reports: clean with one OSD in a size-3 pool.
        let liar = v(vec![
            pg("1.0", "active+clean", &[2]),
            pg("1.1", "active+clean", &[0, 1, 2]),
        ]);
        let e = pgs_ready(&liar, 2, 3).unwrap_err();
        assert!(e.contains("1.0") && e.contains("1 of 3"), "{e}");
        assert_eq!(pgs_ready(&serde_json::json!(null), 2, 3), Ok(None));
        let size1 = v(vec![pg("2.0", "active+clean", &[4])]);
        assert_eq!(pgs_ready(&size1, 1, 1), Ok(Some(())));
    }

    #[test]
    fn options_are_checked() {
        assert!(check_options(&opts()).is_ok());
        let mut o = opts();
        o.pool_size = 3;
        assert!(check_options(&o).is_err(), "size 3 with 1 OSD");
        o.osds_per_group = 3;
        assert!(check_options(&o).is_ok());
        let mut o = opts();
        o.groups[1].label = "bluestore".into();
        assert!(check_options(&o).is_err());
        let mut o = opts();
        o.groups[0].label = "a b".into();
        assert!(check_options(&o).is_err());
        let mut o = opts();
        o.pg_num = 12;
        assert!(check_options(&o).is_err());
        let mut o = opts();
        o.tests.clear();
        assert!(check_options(&o).is_err());
    }
}
