// SPDX-License-Identifier: LGPL-3.0-or-later
//! A throwaway real Ceph 16.2 cluster for tests and benchmarks: one mon, one mgr and optional classic
//! BlueStore OSDs on sparse files, cephx on, loopback only, in its own directory.
//!
//! ```no_run
//! use testcluster::{Cluster, ClusterSpec};
//! // Skips (returns None) when Ceph is not installed, unless FERRO_REQUIRE_CLUSTER is set.
//! let Some(cluster) = testcluster::start_or_skip(ClusterSpec::default().classic_osds(1)) else { return };
//! cluster.create_pool("rbd", 8).unwrap();
//! let osdmap: Vec<u8> = cluster.osd_map_bytes(None).unwrap();
//! let status = cluster.ceph_json(&["status"]).unwrap();
//! // Dropping `cluster` (also while panicking) kills exactly the processes it started.
//! ```
//!
//! Directory layout (`D`): `ceph.conf`, `ceph.client.admin.keyring`, `mon.a/`, `mgr.x/`, `osd.N/`,
//! `log/<name>.log` (daemon log) and `log/<name>.out` (its stdout/stderr), `run/` (admin sockets),
//! `pids/<name>.pid`, `.ferro-testcluster` (marks a directory this crate may wipe).

mod conf;
mod error;
mod osd;
mod process;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};

pub use error::{ClusterError, Result};
pub use osd::{ClassicOsd, FerroOsd, OsdContext, OsdLauncher};
pub use process::{MARKER_ENV, which};

/// Env var: when set (to anything), tests needing a cluster fail instead of skipping if Ceph is missing.
pub const REQUIRE_ENV: &str = "FERRO_REQUIRE_CLUSTER";
/// Env var: when set, a dropped guard keeps its directory (logs, stores) for inspection.
pub const KEEP_ENV: &str = "FERRO_KEEP_CLUSTER";

const MARKER_FILE: &str = ".ferro-testcluster";
const TEMP_PREFIX: &str = "ferro-cluster.";
const MON_ID: &str = "a";
const MGR_ID: &str = "x";
/// Bound on one `ceph` CLI call; the CLI's own `--connect-timeout` is shorter so it fails first.
const CMD_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT_SECS: &str = "20";
const POLL: Duration = Duration::from_millis(250);
/// Bound on SIGKILLed daemons disappearing; an OSD with I/O in flight can take seconds on a busy disk.
const KILL_TIMEOUT: Duration = Duration::from_secs(30);
/// Unix socket paths are limited to 108 bytes; `run/ceph-osd.NNN.asok` needs room.
const MAX_DIR_LEN: usize = 70;

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Number of classic (`ceph-osd`, BlueStore) OSDs.
    pub classic_osds: u32,
    /// Start a mgr (needed for `ceph pg stat`, `ceph -s` usage data, `rados bench` reports; not for
    /// maps, pools or I/O). Without it start-up is a few seconds faster.
    pub mgr: bool,
    /// Size of each BlueStore block file (sparse).
    pub osd_block_size_bytes: u64,
    /// Extra `(section, key, value)` ceph.conf lines; they override the defaults.
    pub extra_conf: Vec<(String, String, String)>,
    /// Bound on each start-up phase (mon quorum, mgr active, each OSD up).
    pub phase_timeout: Duration,
    /// Port for the mon's first attempt; `None` (the default) picks a free one. If it turns out to be taken,
    /// the mon is retried on free ports.
    pub mon_port: Option<u16>,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            classic_osds: 0,
            mgr: true,
            osd_block_size_bytes: 2 << 30,
            extra_conf: Vec::new(),
            phase_timeout: Duration::from_secs(90),
            mon_port: None,
        }
    }
}

impl ClusterSpec {
    /// Sets the number of classic OSDs.
    #[must_use]
    pub fn classic_osds(mut self, n: u32) -> Self {
        self.classic_osds = n;
        self
    }

    /// Starts no mgr (see [`ClusterSpec::mgr`]).
    #[must_use]
    pub fn without_mgr(mut self) -> Self {
        self.mgr = false;
        self
    }

    /// Adds a ceph.conf line, e.g. `.conf("osd", "debug osd", "20")`.
    #[must_use]
    pub fn conf(mut self, section: &str, key: &str, value: &str) -> Self {
        self.extra_conf
            .push((section.to_owned(), key.to_owned(), value.to_owned()));
        self
    }
}

/// What dropping the handle does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifetime {
    /// Kill our daemons and remove the directory (test guard).
    Guard,
    /// Kill our daemons but keep the directory: a detached start that failed keeps its logs.
    GuardKeepDir,
    /// Leave everything running (`cargo xtask cluster up`, or a handle from [`Cluster::open`]).
    Detached,
}

struct Daemon {
    name: String,
    pid: u32,
    /// Present when this handle spawned the daemon, so it can be reaped (no zombies in long test runs).
    child: Option<Child>,
}

/// A running throwaway cluster. See the crate docs.
pub struct Cluster {
    dir: PathBuf,
    fsid: String,
    mon_addr: SocketAddr,
    phase_timeout: Duration,
    daemons: Mutex<Vec<Daemon>>,
    lifetime: Lifetime,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("dir", &self.dir)
            .field("fsid", &self.fsid)
            .field("mon_addr", &self.mon_addr)
            .finish_non_exhaustive()
    }
}

/// Is Ceph (mon, mgr, osd, CLI) installed?
pub fn ceph_installed() -> bool {
    [
        "ceph-mon",
        "ceph-mgr",
        "ceph-osd",
        "ceph",
        "ceph-authtool",
        "monmaptool",
    ]
    .iter()
    .all(|b| which(b).is_some())
}

/// For tests that need Ceph installed: true if it is; false (after printing why on stderr) if the test should
/// skip. Panics if Ceph is missing while `FERRO_REQUIRE_CLUSTER` is set (CI), so nothing silently skips there.
pub fn ceph_or_skip() -> bool {
    if ceph_installed() {
        return true;
    }
    if std::env::var_os(REQUIRE_ENV).is_some() {
        panic!("{REQUIRE_ENV} is set but Ceph 16.2 is not installed (run ./scripts/setup.sh)");
    }
    eprintln!(
        "skipping: Ceph (ceph-mon, ceph-mgr, ceph-osd) not installed; set {REQUIRE_ENV}=1 to fail instead"
    );
    false
}

/// For tests: starts a cluster, or returns `None` when [`ceph_or_skip`] says to skip. Panics (failing the
/// test) if the cluster cannot start.
pub fn start_or_skip(spec: ClusterSpec) -> Option<Cluster> {
    if !ceph_or_skip() {
        return None;
    }
    match Cluster::start(spec) {
        Ok(c) => Some(c),
        Err(e) => panic!("starting the throwaway Ceph cluster failed: {e}"),
    }
}

impl Cluster {
    /// Starts a cluster in a fresh directory under `$TMPDIR` (or /tmp). Dropping the handle (also during a
    /// panic) kills its daemons and removes the directory (kept if `FERRO_KEEP_CLUSTER` is set).
    pub fn start(spec: ClusterSpec) -> Result<Cluster> {
        reap_stale_guards();
        let dir = make_temp_dir()?;
        write_owner(&dir)?;
        register_for_exit(&dir);
        Self::start_at(dir, &spec, Lifetime::Guard)
    }

    /// Starts a cluster in `dir` whose daemons keep running after the handle is dropped (and after this
    /// process exits). `dir` must be absent, empty, or a stopped cluster directory (which is wiped).
    /// Stop it with [`Cluster::stop_dir`].
    pub fn start_detached(dir: &Path, spec: &ClusterSpec) -> Result<Cluster> {
        if dir.exists() {
            let entries: Vec<_> = std::fs::read_dir(dir)
                .map_err(error::io_err(format!("reading {}", dir.display())))?
                .collect();
            if !entries.is_empty() {
                if !dir.join(MARKER_FILE).exists() {
                    return Err(ClusterError::BadDir {
                        dir: dir.to_owned(),
                        reason: "not empty and not a testcluster directory; refusing to wipe it".into(),
                    });
                }
                let canon = canonical(dir)?;
                if !our_live_pids(&canon).is_empty() {
                    return Err(ClusterError::BadDir {
                        dir: dir.to_owned(),
                        reason: "a cluster is still running there; run `cluster down` first".into(),
                    });
                }
                std::fs::remove_dir_all(dir).map_err(error::io_err(format!("wiping {}", dir.display())))?;
            }
        }
        std::fs::create_dir_all(dir).map_err(error::io_err(format!("creating {}", dir.display())))?;
        let dir = canonical(dir)?;
        let mut c = Self::start_at(dir, spec, Lifetime::GuardKeepDir)?;
        // Only a fully started cluster is left running; a failed start above was torn down by Drop.
        c.lifetime = Lifetime::Detached;
        Ok(c)
    }

    /// Attaches to a cluster started by [`Cluster::start_detached`] (e.g. by another process). Dropping the
    /// handle leaves it running.
    pub fn open(dir: &Path) -> Result<Cluster> {
        let dir = canonical(dir)?;
        let marker = std::fs::read_to_string(dir.join(MARKER_FILE)).map_err(error::io_err(format!(
            "{} is not a testcluster directory",
            dir.display()
        )))?;
        let field = |k: &str| marker.lines().find_map(|l| l.strip_prefix(k)).map(str::to_owned);
        let bad = |detail: &str| ClusterError::BadDir {
            dir: dir.clone(),
            reason: detail.to_owned(),
        };
        let fsid = field("fsid=").ok_or_else(|| bad("marker lacks fsid"))?;
        let mon_addr = field("mon_addr=")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| bad("marker lacks a valid mon_addr"))?;
        let daemons = recorded_pids(&dir)
            .into_iter()
            .map(|(name, pid)| Daemon {
                name,
                pid,
                child: None,
            })
            .collect();
        Ok(Cluster {
            dir,
            fsid,
            mon_addr,
            phase_timeout: ClusterSpec::default().phase_timeout,
            daemons: Mutex::new(daemons),
            lifetime: Lifetime::Detached,
        })
    }

    /// Kills every process of the cluster in `dir` (recorded pids and any process carrying its marker) and
    /// verifies none remains. Returns how many were killed. Only processes whose environment carries
    /// `FERRO_TESTCLUSTER_DIR=<dir>` are ever signalled.
    pub fn stop_dir(dir: &Path) -> Result<usize> {
        let dir = canonical(dir)?;
        let victims = our_live_pids(&dir);
        for (_, pid) in &victims {
            process::signal(*pid, libc::SIGKILL);
        }
        wait_gone(&victims, &mut [], KILL_TIMEOUT)?;
        let _ = std::fs::remove_dir_all(dir.join("pids"));
        Ok(victims.len())
    }

    fn start_at(dir: PathBuf, spec: &ClusterSpec, lifetime: Lifetime) -> Result<Cluster> {
        for bin in ["ceph-mon", "ceph-mgr", "ceph", "ceph-authtool", "monmaptool"] {
            if which(bin).is_none() {
                return Err(ClusterError::MissingBinary(bin.into()));
            }
        }
        if dir.as_os_str().len() > MAX_DIR_LEN {
            return Err(ClusterError::BadDir {
                dir,
                reason: format!("path longer than {MAX_DIR_LEN} bytes (admin socket paths would not fit)"),
            });
        }
        for sub in ["log", "run", "pids", "crash", "tmp", "mgr.x"] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).map_err(error::io_err(format!("creating {}", p.display())))?;
        }
        let fsid = new_uuid()?;
        // Placeholder address until the mon has a port; the handle exists from here on so that any
        // failure below tears down what was already started.
        let mut c = Cluster {
            dir,
            fsid,
            mon_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            phase_timeout: spec.phase_timeout,
            daemons: Mutex::new(Vec::new()),
            lifetime,
        };
        let t0 = Instant::now();
        c.make_keys()?;
        c.start_mon(spec)?;
        let t_mon = t0.elapsed();
        if spec.mgr {
            // Started before the OSDs and waited for last: its Python modules load while OSDs format.
            c.start_mgr()?;
        }
        let mut ids = Vec::new();
        for _ in 0..spec.classic_osds {
            ids.push(c.spawn_osd(&ClassicOsd)?);
        }
        for id in ids {
            c.wait_osd_up(id, ClassicOsd.up_timeout())?;
        }
        let t_osds = t0.elapsed();
        if spec.mgr {
            c.wait_mgr_active()?;
        }
        eprintln!(
            "testcluster: {} up in {:.1} s (mon quorum {:.1} s, {} OSD(s) up {:.1} s, mgr {})",
            c.dir.display(),
            t0.elapsed().as_secs_f64(),
            t_mon.as_secs_f64(),
            spec.classic_osds,
            t_osds.as_secs_f64(),
            if spec.mgr { "active" } else { "none" },
        );
        Ok(c)
    }

    // ---- accessors ----

    /// The cluster directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<dir>/ceph.conf`; export it as `CEPH_CONF` for the `ceph`, `rados` and `rbd` tools.
    pub fn conf_path(&self) -> PathBuf {
        self.dir.join("ceph.conf")
    }

    /// The client.admin keyring.
    pub fn admin_keyring(&self) -> PathBuf {
        self.dir.join("ceph.client.admin.keyring")
    }

    /// The base64 client.admin secret from the keyring.
    pub fn admin_key(&self) -> Result<String> {
        let path = self.admin_keyring();
        let text =
            std::fs::read_to_string(&path).map_err(error::io_err(format!("reading {}", path.display())))?;
        text.lines()
            .find_map(|l| l.trim().strip_prefix("key = ").map(str::to_owned))
            .ok_or_else(|| ClusterError::BadOutput {
                command: path.display().to_string(),
                detail: "no key".into(),
            })
    }

    /// The monitor's msgr2 address (127.0.0.1:PORT).
    pub fn mon_addr(&self) -> SocketAddr {
        self.mon_addr
    }

    /// The monitor's address as Ceph writes it: `v2:127.0.0.1:PORT`.
    pub fn mon_host(&self) -> String {
        format!("v2:{}", self.mon_addr)
    }

    /// The cluster fsid.
    pub fn fsid(&self) -> &str {
        &self.fsid
    }

    /// `(name, pid)` of each daemon this handle knows about, e.g. `("osd.0", 1234)`.
    pub fn daemons(&self) -> Vec<(String, u32)> {
        self.lock().iter().map(|d| (d.name.clone(), d.pid)).collect()
    }

    /// `(name, pid, running)` for each daemon, where running means alive and still carrying this cluster's
    /// marker (a reused pid does not count).
    pub fn daemon_status(&self) -> Vec<(String, u32, bool)> {
        self.daemons()
            .into_iter()
            .map(|(n, p)| (n, p, process::is_ours(p, &self.dir)))
            .collect()
    }

    /// The daemon's log file, e.g. `log_path("osd.0")`.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join("log").join(format!("{name}.log"))
    }

    // ---- CLI access ----

    /// Runs `ceph <args>` against this cluster as client.admin and returns its stdout.
    pub fn ceph(&self, args: &[&str]) -> Result<String> {
        let out = process::run(&mut self.ceph_cmd(args), CMD_TIMEOUT)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs `ceph <args> --format=json` and parses the output (`Null` for commands that print nothing).
    pub fn ceph_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut cmd = self.ceph_cmd(args);
        cmd.arg("--format=json");
        let what = process::describe(&cmd);
        let out = process::run(&mut cmd, CMD_TIMEOUT)?;
        if out.stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(&out.stdout).map_err(|e| ClusterError::BadOutput {
            command: what,
            detail: e.to_string(),
        })
    }

    /// Runs `rados <args>` against this cluster and returns its stdout.
    pub fn rados(&self, args: &[&str], timeout: Duration) -> Result<String> {
        let mut cmd = Command::new("rados");
        cmd.arg("-c").arg(self.conf_path()).args(args);
        let out = process::run(&mut cmd, timeout)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn ceph_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ceph");
        cmd.arg("-c")
            .arg(self.conf_path())
            .args(["--connect-timeout", CONNECT_TIMEOUT_SECS])
            .args(args);
        cmd
    }

    /// The binary output of a `ceph ... -o FILE` command (e.g. `["mon", "getmap"]`).
    pub fn ceph_bytes(&self, args: &[&str]) -> Result<Vec<u8>> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let path = self
            .dir
            .join("tmp")
            .join(format!("out.{}", SEQ.fetch_add(1, Ordering::Relaxed)));
        let p = path.to_string_lossy().into_owned();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-o", &p]);
        self.ceph(&all)?;
        let bytes = std::fs::read(&path).map_err(error::io_err(format!("reading {p}")))?;
        let _ = std::fs::remove_file(&path);
        Ok(bytes)
    }

    /// The encoded MonMap (`ceph mon getmap`).
    pub fn mon_map_bytes(&self) -> Result<Vec<u8>> {
        self.ceph_bytes(&["mon", "getmap"])
    }

    /// The encoded full OSDMap (`ceph osd getmap [epoch]`), latest if `epoch` is None.
    pub fn osd_map_bytes(&self, epoch: Option<u32>) -> Result<Vec<u8>> {
        match epoch {
            Some(e) => self.ceph_bytes(&["osd", "getmap", &e.to_string()]),
            None => self.ceph_bytes(&["osd", "getmap"]),
        }
    }

    /// The encoded CRUSH map (`ceph osd getcrushmap`).
    pub fn crush_map_bytes(&self) -> Result<Vec<u8>> {
        self.ceph_bytes(&["osd", "getcrushmap"])
    }

    /// Creates a replicated pool (size from `osd pool default size`, i.e. 1) with application `rados`
    /// enabled, and returns its id.
    pub fn create_pool(&self, name: &str, pg_num: u32) -> Result<i64> {
        let pg = pg_num.to_string();
        self.ceph(&["osd", "pool", "create", name, &pg, &pg, "replicated"])?;
        self.ceph(&["osd", "pool", "application", "enable", name, "rados"])?;
        self.pool_id(name)
    }

    /// Creates an erasure-coded pool with a fresh profile `<name>-profile` (k data, m coding chunks,
    /// failure domain osd), and returns its id.
    pub fn create_ec_pool(&self, name: &str, pg_num: u32, k: u32, m: u32) -> Result<i64> {
        let profile = format!("{name}-profile");
        let (k, m) = (format!("k={k}"), format!("m={m}"));
        self.ceph(&[
            "osd",
            "erasure-code-profile",
            "set",
            &profile,
            &k,
            &m,
            "crush-failure-domain=osd",
        ])?;
        let pg = pg_num.to_string();
        self.ceph(&["osd", "pool", "create", name, &pg, &pg, "erasure", &profile])?;
        self.ceph(&["osd", "pool", "application", "enable", name, "rados"])?;
        self.pool_id(name)
    }

    /// The id of pool `name`.
    pub fn pool_id(&self, name: &str) -> Result<i64> {
        let dump = self.ceph_json(&["osd", "dump"])?;
        dump["pools"]
            .as_array()
            .and_then(|pools| pools.iter().find(|p| p["pool_name"] == name))
            .and_then(|p| p["pool"].as_i64())
            .ok_or_else(|| ClusterError::BadOutput {
                command: "ceph osd dump".into(),
                detail: format!("pool {name} not listed"),
            })
    }

    /// Waits until every PG is active+clean.
    pub fn wait_for_clean(&self, timeout: Duration) -> Result<()> {
        // PG states come from the mgr; without one `pg stat` would block until its timeout.
        if !self.lock().iter().any(|d| d.name.starts_with("mgr.")) {
            return Err(ClusterError::Unsupported(
                "wait_for_clean needs a mgr (ClusterSpec::mgr)".into(),
            ));
        }
        self.wait_for("all PGs active+clean", timeout, || {
            let st = self.ceph_json(&["pg", "stat"])?;
            let st = &st["pg_summary"];
            let total = st["num_pgs"].as_u64().unwrap_or(u64::MAX);
            let clean: u64 = st["num_pg_by_state"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter(|s| s["name"] == "active+clean")
                        .filter_map(|s| s["num"].as_u64())
                        .sum()
                })
                .unwrap_or(0);
            Ok((clean == total).then_some(()))
        })
    }

    /// Polls `probe` until it returns `Some`, for at most `timeout`. Fails early if one of our daemons dies;
    /// errors include the tails of the daemon logs. Errors from `probe` count as "not yet" (the cluster may be
    /// settling); the last one is reported on timeout.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        let mut last_err = None;
        loop {
            self.check_daemons(what)?;
            match probe() {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => {}
                Err(e) => last_err = Some(e),
            }
            if Instant::now() >= deadline {
                let mut logs = self.log_tails();
                if let Some(e) = last_err {
                    logs = format!("last error: {e}\n{logs}");
                }
                return Err(ClusterError::Timeout {
                    what: what.to_owned(),
                    after: timeout,
                    logs,
                });
            }
            thread::sleep(POLL);
        }
    }

    // ---- OSDs ----

    /// Registers a new OSD with the monitors, prepares it with `launcher`, starts it and waits until it is
    /// up. Returns its id.
    pub fn add_osd(&self, launcher: &dyn OsdLauncher) -> Result<u32> {
        let id = self.spawn_osd(launcher)?;
        self.wait_osd_up(id, launcher.up_timeout())?;
        Ok(id)
    }

    /// Like [`Cluster::add_osd`] without waiting for `up`.
    pub fn spawn_osd(&self, launcher: &dyn OsdLauncher) -> Result<u32> {
        let ctx = self.new_osd_context()?;
        launcher.prepare(&ctx)?;
        self.spawn_daemon(&format!("osd.{}", ctx.id), launcher.command(&ctx))?;
        Ok(ctx.id)
    }

    /// Waits until `osd.<id>` is up in the OSD map.
    pub fn wait_osd_up(&self, id: u32, timeout: Duration) -> Result<()> {
        self.wait_for(&format!("osd.{id} up"), timeout, || {
            let dump = self.ceph_json(&["osd", "dump"])?;
            let up = dump["osds"]
                .as_array()
                .and_then(|v| v.iter().find(|o| o["osd"] == id))
                .is_some_and(|o| o["up"] == 1);
            Ok(up.then_some(()))
        })
    }

    /// Starts an existing OSD again (after [`Cluster::kill_daemon`]) with `launcher` and waits until it is up.
    pub fn restart_osd(&self, id: u32, launcher: &dyn OsdLauncher) -> Result<()> {
        let data_dir = self.dir.join(format!("osd.{id}"));
        let uuid = std::fs::read_to_string(data_dir.join("fsid"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let ctx = OsdContext {
            id,
            uuid,
            fsid: self.fsid.clone(),
            keyring: data_dir.join("keyring"),
            data_dir,
            conf: self.conf_path(),
            mon_host: self.mon_host(),
            log_file: self.log_path(&format!("osd.{id}")),
        };
        self.spawn_daemon(&format!("osd.{id}"), launcher.command(&ctx))?;
        self.wait_osd_up(id, launcher.up_timeout())
    }

    /// Allocates an OSD id (`ceph osd new` with a fresh uuid and cephx key) and writes its keyring.
    fn new_osd_context(&self) -> Result<OsdContext> {
        let uuid = new_uuid()?;
        let key = self.gen_key()?;
        let secrets = self.dir.join("tmp").join(format!("osd-{uuid}.json"));
        write(&secrets, &format!("{{\"cephx_secret\": \"{key}\"}}\n"))?;
        let out = self.ceph(&["osd", "new", &uuid, "-i", &secrets.to_string_lossy()])?;
        let _ = std::fs::remove_file(&secrets);
        let id: u32 = out.trim().parse().map_err(|_| ClusterError::BadOutput {
            command: "ceph osd new".into(),
            detail: format!("expected an OSD id, got {out:?}"),
        })?;
        let data_dir = self.dir.join(format!("osd.{id}"));
        std::fs::create_dir_all(&data_dir)
            .map_err(error::io_err(format!("creating {}", data_dir.display())))?;
        let keyring = data_dir.join("keyring");
        write(&keyring, &format!("[osd.{id}]\n\tkey = {key}\n"))?;
        Ok(OsdContext {
            id,
            uuid,
            fsid: self.fsid.clone(),
            data_dir,
            keyring,
            conf: self.conf_path(),
            mon_host: self.mon_host(),
            log_file: self.log_path(&format!("osd.{id}")),
        })
    }

    // ---- daemon management ----

    /// Kills one daemon (SIGKILL) and waits until it is gone. Returns false if it was not running.
    pub fn kill_daemon(&self, name: &str) -> Result<bool> {
        let mut ds = self.lock();
        let Some(idx) = ds.iter().position(|d| d.name == name) else {
            return Ok(false);
        };
        let mut d = ds.remove(idx);
        drop(ds);
        let ours = process::is_ours(d.pid, &self.dir);
        if ours {
            process::signal(d.pid, libc::SIGKILL);
        }
        wait_gone(
            &[(d.name.clone(), d.pid)],
            std::slice::from_mut(&mut d),
            KILL_TIMEOUT,
        )?;
        let _ = std::fs::remove_file(self.dir.join("pids").join(format!("{name}.pid")));
        Ok(ours)
    }

    /// Kills all daemons of this cluster and verifies that none remains.
    pub fn stop(&self) -> Result<()> {
        let mut ds = std::mem::take(&mut *self.lock());
        // Recorded pids plus anything else carrying our marker (e.g. a daemon that forked).
        let mut victims = our_live_pids(&self.dir);
        for d in &ds {
            if !victims.iter().any(|(_, p)| *p == d.pid) && process::is_ours(d.pid, &self.dir) {
                victims.push((d.name.clone(), d.pid));
            }
        }
        for (_, pid) in &victims {
            process::signal(*pid, libc::SIGKILL);
        }
        wait_gone(&victims, &mut ds, KILL_TIMEOUT)?;
        let _ = std::fs::remove_dir_all(self.dir.join("pids"));
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Daemon>> {
        // A panic while holding the lock leaves the list intact; teardown must still work.
        self.daemons
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn spawn_daemon(&self, name: &str, mut cmd: Command) -> Result<u32> {
        let out_path = self.dir.join("log").join(format!("{name}.out"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .map_err(error::io_err(format!("opening {}", out_path.display())))?;
        let err = out
            .try_clone()
            .map_err(error::io_err("duplicating a log handle"))?;
        cmd.env(MARKER_ENV, &self.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if self.lifetime != Lifetime::Guard {
            // Own process group: a Ctrl-C in the terminal that ran `cluster up` must not reach the daemons.
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let what = process::describe(&cmd);
        let child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ClusterError::MissingBinary(cmd.get_program().to_string_lossy().into_owned())
            } else {
                ClusterError::Io {
                    context: format!("spawning `{what}`"),
                    source: e,
                }
            }
        })?;
        let pid = child.id();
        write(
            &self.dir.join("pids").join(format!("{name}.pid")),
            &format!("{pid}\n"),
        )?;
        self.lock().push(Daemon {
            name: name.to_owned(),
            pid,
            child: Some(child),
        });
        Ok(pid)
    }

    /// Fails with the daemon's log tail if a daemon we track has exited.
    fn check_daemons(&self, what: &str) -> Result<()> {
        let mut ds = self.lock();
        for d in ds.iter_mut() {
            let dead = match d.child.as_mut() {
                Some(c) => !matches!(c.try_wait(), Ok(None)),
                None => !process::is_ours(d.pid, &self.dir),
            };
            if dead {
                return Err(ClusterError::DaemonDied {
                    name: d.name.clone(),
                    what: what.to_owned(),
                    logs: self.log_tail(&d.name),
                });
            }
        }
        Ok(())
    }

    fn log_tail(&self, name: &str) -> String {
        let log = self.log_path(name);
        let out = self.dir.join("log").join(format!("{name}.out"));
        // Error-level lines (" -1 ") first: a plain tail is often RocksDB statistics dumped at exit.
        let full = process::tail_file(&log, 5000);
        let errors: Vec<&str> = full.lines().filter(|l| l.contains(" -1 ")).collect();
        let errors = errors[errors.len().saturating_sub(10)..].join("\n");
        format!(
            "--- {} (last error lines) ---\n{errors}\n--- {} (tail) ---\n{}\n--- {} (tail) ---\n{}",
            log.display(),
            log.display(),
            process::tail_str(&full, 20),
            out.display(),
            process::tail_file(&out, 10)
        )
    }

    fn log_tails(&self) -> String {
        let names: Vec<String> = self.lock().iter().map(|d| d.name.clone()).collect();
        names
            .iter()
            .map(|n| self.log_tail(n))
            .collect::<Vec<_>>()
            .join("\n")
    }

    // ---- bootstrap ----

    fn gen_key(&self) -> Result<String> {
        let out = process::run(Command::new("ceph-authtool").arg("--gen-print-key"), CMD_TIMEOUT)?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Keyrings: client.admin (shared with users), mgr.x, and the mon's bootstrap keyring holding all three,
    /// so that the mgr can authenticate without a round of `ceph auth` commands.
    fn make_keys(&self) -> Result<()> {
        let d = &self.dir;
        let admin = d.join("ceph.client.admin.keyring");
        let mgr = d.join("mgr.x").join("keyring");
        let mon = d.join("mon.keyring");
        let authtool = |args: &[&str]| process::run(Command::new("ceph-authtool").args(args), CMD_TIMEOUT);
        let s = |p: &Path| p.to_string_lossy().into_owned();
        authtool(&[
            &s(&mon),
            "--create-keyring",
            "--gen-key",
            "-n",
            "mon.",
            "--cap",
            "mon",
            "allow *",
        ])?;
        authtool(&[
            &s(&admin),
            "--create-keyring",
            "--gen-key",
            "-n",
            "client.admin",
            "--cap",
            "mon",
            "allow *",
            "--cap",
            "osd",
            "allow *",
            "--cap",
            "mgr",
            "allow *",
            "--cap",
            "mds",
            "allow *",
        ])?;
        authtool(&[
            &s(&mgr),
            "--create-keyring",
            "--gen-key",
            "-n",
            &format!("mgr.{MGR_ID}"),
            "--cap",
            "mon",
            "allow profile mgr",
            "--cap",
            "osd",
            "allow *",
            "--cap",
            "mds",
            "allow *",
        ])?;
        authtool(&[&s(&mon), "--import-keyring", &s(&admin)])?;
        authtool(&[&s(&mon), "--import-keyring", &s(&mgr)])?;
        Ok(())
    }

    /// Writes ceph.conf for a mon port, makes the mon store and starts the mon; retries with another port
    /// if the chosen one was taken in the meantime (several clusters may start at once).
    fn start_mon(&mut self, spec: &ClusterSpec) -> Result<()> {
        const ATTEMPTS: usize = 5;
        let name = format!("mon.{MON_ID}");
        for attempt in 1..=ATTEMPTS {
            let port = match spec.mon_port {
                Some(p) if attempt == 1 => p,
                _ => free_port()?,
            };
            self.mon_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let conf = conf::render(&conf::ConfParams {
                dir: &self.dir,
                fsid: &self.fsid,
                mon_addr: self.mon_addr,
                osd_block_size_bytes: spec.osd_block_size_bytes,
                extra: &spec.extra_conf,
            });
            write(&self.conf_path(), &conf)?;
            write(
                &self.dir.join(MARKER_FILE),
                &format!("fsid={}\nmon_addr={}\n", self.fsid, self.mon_addr),
            )?;
            let monmap = self.dir.join("monmap");
            let mon_data = self.dir.join(&name);
            if mon_data.exists() {
                std::fs::remove_dir_all(&mon_data).map_err(error::io_err("removing a failed mon store"))?;
            }
            process::run(
                Command::new("monmaptool")
                    .args(["--create", "--clobber", "--fsid", &self.fsid, "--addv", MON_ID])
                    .arg(format!("[v2:{}]", self.mon_addr))
                    .arg(&monmap),
                CMD_TIMEOUT,
            )?;
            process::run(
                Command::new("ceph-mon")
                    .arg("-c")
                    .arg(self.conf_path())
                    .args(["--mkfs", "-i", MON_ID, "--monmap"])
                    .arg(&monmap)
                    .arg("--keyring")
                    .arg(self.dir.join("mon.keyring")),
                CMD_TIMEOUT,
            )?;
            let mut cmd = Command::new("ceph-mon");
            cmd.args(["-f", "-i", MON_ID, "-c"]).arg(self.conf_path());
            self.spawn_daemon(&name, cmd)?;
            match self.wait_quorum() {
                Ok(()) => return Ok(()),
                // RocksDB dumps statistics on exit, so look further back than the error's short tail.
                Err(ClusterError::DaemonDied { .. })
                    if attempt < ATTEMPTS
                        && [
                            self.log_path(&name),
                            self.dir.join("log").join(format!("{name}.out")),
                        ]
                        .iter()
                        .any(|p| process::tail_file(p, 2000).contains("Address already in use")) =>
                {
                    let mut ds = self.lock();
                    if let Some(i) = ds.iter().position(|d| d.name == name)
                        && let Some(mut child) = ds.remove(i).child
                    {
                        let _ = child.wait(); // it has exited; reap it
                    }
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the last attempt returns")
    }

    fn wait_quorum(&self) -> Result<()> {
        self.wait_for("mon quorum", self.phase_timeout, || {
            // A cheap TCP probe first: while the mon is not listening (or died on a taken port), a CLI call
            // would block for its whole connect timeout before we notice.
            if std::net::TcpStream::connect_timeout(&self.mon_addr, Duration::from_millis(200)).is_err() {
                return Ok(None);
            }
            // A short connect timeout: if the port belongs to someone else, the CLI would otherwise hang there
            // for the full timeout while our mon has already died (checked between probes).
            let q = self.ceph_json(&["--connect-timeout", "4", "quorum_status"])?;
            let in_quorum = q["quorum_names"]
                .as_array()
                .is_some_and(|v| v.iter().any(|n| n == MON_ID));
            Ok(in_quorum.then_some(()))
        })
    }

    fn start_mgr(&self) -> Result<()> {
        let mut cmd = Command::new("ceph-mgr");
        cmd.args(["-f", "-i", MGR_ID, "-c"]).arg(self.conf_path());
        self.spawn_daemon(&format!("mgr.{MGR_ID}"), cmd)?;
        Ok(())
    }

    fn wait_mgr_active(&self) -> Result<()> {
        self.wait_for("mgr active", self.phase_timeout, || {
            let st = self.ceph_json(&["mgr", "stat"])?;
            Ok((st["available"] == true && st["active_name"] == MGR_ID).then_some(()))
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.lifetime == Lifetime::Detached {
            return;
        }
        if let Err(e) = self.stop() {
            eprintln!(
                "testcluster: stopping the cluster in {} failed: {e}",
                self.dir.display()
            );
        }
        if thread::panicking() {
            eprintln!(
                "testcluster: tearing down {} after a panic; set {KEEP_ENV}=1 to keep its logs",
                self.dir.display()
            );
        }
        if self.lifetime == Lifetime::GuardKeepDir {
            eprintln!(
                "testcluster: processes stopped; logs kept in {}/log",
                self.dir.display()
            );
        } else if std::env::var_os(KEEP_ENV).is_some() {
            eprintln!("testcluster: keeping {} ({KEEP_ENV} is set)", self.dir.display());
        } else if self.dir.join(MARKER_FILE).exists() || self.dir.join("owner").exists() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        unregister_for_exit(&self.dir);
    }
}

// ---- helpers ----

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(error::io_err(format!("writing {}", path.display())))
}

fn canonical(dir: &Path) -> Result<PathBuf> {
    dir.canonicalize()
        .map_err(error::io_err(format!("resolving {}", dir.display())))
}

fn new_uuid() -> Result<String> {
    let u = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map_err(error::io_err("reading a fresh uuid"))?;
    Ok(u.trim().to_owned())
}

/// A port that was free a moment ago (bind-probe on 127.0.0.1:0). The caller retries if it was taken since.
fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(error::io_err("probing for a free port"))?;
    Ok(l.local_addr()
        .map_err(error::io_err("probing for a free port"))?
        .port())
}

fn temp_base() -> PathBuf {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// A new unique directory `$TMPDIR/ferro-cluster.<pid>.<n>` (created atomically, so concurrent test
/// processes never share one).
fn make_temp_dir() -> Result<PathBuf> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let base = temp_base();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    for _ in 0..100 {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{TEMP_PREFIX}{}.{nanos:x}.{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return canonical(&dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(ClusterError::Io {
                    context: format!("creating {}", dir.display()),
                    source: e,
                });
            }
        }
    }
    Err(ClusterError::BadDir {
        dir: base,
        reason: "could not create a unique directory".into(),
    })
}

/// Records which process owns a guard directory, so a later run can clean up after a killed test process.
fn write_owner(dir: &Path) -> Result<()> {
    let pid = std::process::id();
    let start = process::start_time(pid).unwrap_or(0);
    let tmp = dir.join("owner.tmp");
    write(&tmp, &format!("{pid} {start}\n"))?;
    std::fs::rename(&tmp, dir.join("owner")).map_err(error::io_err("recording the owner"))
}

/// Stops and removes guard directories whose owning process is gone (it was killed before Drop ran).
fn reap_stale_guards() {
    let Ok(entries) = std::fs::read_dir(temp_base()) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            continue;
        }
        let dir = e.path();
        let Ok(owner) = std::fs::read_to_string(dir.join("owner")) else {
            continue; // Being created right now, or not ours.
        };
        let mut it = owner.split_whitespace().map(|s| s.parse::<u64>().ok());
        let (Some(Some(pid)), Some(Some(start))) = (it.next(), it.next()) else {
            continue;
        };
        let owner_alive = u32::try_from(pid).ok().and_then(process::start_time) == Some(start);
        if !owner_alive && Cluster::stop_dir(&dir).is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Live processes of the cluster in `dir`: recorded pids that still carry our marker, plus any other
/// process carrying it.
///
/// Never this process or its ancestors: a shell that exported the marker (so that daemons it starts belong
/// to the cluster) may be the one running `cluster down`.
fn our_live_pids(dir: &Path) -> Vec<(String, u32)> {
    let exempt = process::self_and_ancestors();
    let mut found: Vec<(String, u32)> = recorded_pids(dir)
        .into_iter()
        .filter(|(_, pid)| !exempt.contains(pid) && process::is_ours(*pid, dir))
        .collect();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if !exempt.contains(&pid) && !found.iter().any(|(_, p)| *p == pid) && process::is_ours(pid, dir) {
                found.push((format!("pid {pid}"), pid));
            }
        }
    }
    found
}

fn recorded_pids(dir: &Path) -> Vec<(String, u32)> {
    let Ok(entries) = std::fs::read_dir(dir.join("pids")) else {
        return Vec::new();
    };
    let mut v: Vec<(String, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().strip_suffix(".pid")?.to_owned();
            let pid = std::fs::read_to_string(e.path()).ok()?.trim().parse().ok()?;
            Some((name, pid))
        })
        .collect();
    v.sort();
    v
}

/// Waits until every `(name, pid)` is gone, reaping any of them that are our children.
fn wait_gone(victims: &[(String, u32)], children: &mut [Daemon], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        for d in children.iter_mut() {
            if let Some(c) = d.child.as_mut() {
                let _ = c.try_wait();
            }
        }
        let left: Vec<(String, u32)> = victims
            .iter()
            .filter(|(_, p)| process::alive(*p))
            .cloned()
            .collect();
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(ClusterError::Survivors(left));
        }
        thread::sleep(Duration::from_millis(20));
    }
    // Dead daemons we did not spawn are zombies until their new parent (init) reaps them; give it a moment
    // so that `ps` right after `cluster down` shows nothing. Best effort: a zombie holds no resources.
    let reaped = Instant::now() + Duration::from_secs(3);
    while Instant::now() < reaped
        && victims
            .iter()
            .any(|(_, p)| Path::new(&format!("/proc/{p}")).exists())
    {
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

// ---- last-resort cleanup at process exit ----
//
// A guard in a `static`, or one leaked with mem::forget, never runs Drop; the test harness still exits
// through exit(3), so an atexit hook kills the daemons of every guard still registered.

static LIVE_GUARDS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn register_for_exit(dir: &Path) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registering a plain extern "C" fn with no captured state.
        unsafe {
            libc::atexit(kill_live_guards_at_exit);
        }
    });
    LIVE_GUARDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(dir.to_owned());
}

fn unregister_for_exit(dir: &Path) {
    LIVE_GUARDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|d| d != dir);
}

extern "C" fn kill_live_guards_at_exit() {
    // Must not unwind across the FFI boundary.
    let _ = std::panic::catch_unwind(|| {
        let dirs = std::mem::take(
            &mut *LIVE_GUARDS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for dir in dirs {
            if Cluster::stop_dir(&dir).is_ok() && std::env::var_os(KEEP_ENV).is_none() {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    });
}
