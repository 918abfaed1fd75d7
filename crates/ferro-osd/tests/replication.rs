// SPDX-License-Identifier: LGPL-3.0-or-later
//! Issue 6 acceptance on a live throwaway cluster (crate testcluster: classic mon, ferro-osd OSDs, pool of size 3 /
//! min_size 2 on a CRUSH rule choosing OSDs of class `ferro`): a write waits for every replica, an OSD marked out
//! is backfilled elsewhere, a fresh OSD is backfilled in, two of three replicas down makes I/O wait (not fail) and
//! it resumes when one returns; plus the soak (`scripts/soak-replication.sh`, ignored here). Every test checks
//! acknowledged writes byte-exact (tests/scripts/acked_writer.py) and the replicas of every PG identical
//! (`ferro object-digest <pgid>` on each acting OSD's admin socket). Skips when Ceph is not installed.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testcluster::{Cluster, ClusterSpec, FerroOsd};

mod live;
use live::{ferro_size3_pool, python_available, run, script, verify_acks};

const PGS: u32 = 8;

fn ferro() -> FerroOsd {
    let mut f = FerroOsd::new(env!("CARGO_BIN_EXE_ferro-osd"));
    f.device_size_bytes = 1 << 30;
    f
}

fn env_cmd(c: &Cluster, prog: &str) -> Command {
    let mut cmd = Command::new(prog);
    cmd.env("CEPH_CONF", c.conf_path());
    cmd
}

/// A cluster with `n` ferro-osds and pool `name` (8 PGs, size 3, min_size 2, on class `ferro`). Short heartbeat
/// grace so that a killed OSD is marked down within seconds.
fn setup(n: usize, name: &str) -> Option<(Cluster, Vec<u32>, i64)> {
    setup_with_grace(n, name, 6)
}

/// `setup` with heartbeat grace `grace_s`. The backfill tests kill no OSD and use Ceph's default 20 s: with 6 s a
/// saturated shared disk (writes taking seconds, the reactor preempted) could mark a live peer down and stall their
/// writes behind a needless re-peering.
fn setup_with_grace(n: usize, name: &str, grace_s: u32) -> Option<(Cluster, Vec<u32>, i64)> {
    if !python_available() {
        eprintln!("skipping: python3-rados not available");
        return None;
    }
    let spec = ClusterSpec::default()
        .without_mgr()
        .conf("global", "osd heartbeat grace", &grace_s.to_string())
        .conf("global", "osd heartbeat interval", "1")
        .conf("mon", "mon osd min down reporters", "1")
        .conf("mon", "mon osd adjust heartbeat grace", "false");
    let c = testcluster::start_or_skip(spec)?;
    let ids: Vec<u32> = (0..n).map(|_| c.add_osd(&ferro()).unwrap()).collect();
    let pool = ferro_size3_pool(&c, name, PGS);
    wait_clean(&c, pool, Duration::from_secs(90));
    Some((c, ids, pool))
}

fn osd_field(c: &Cluster, id: u32, field: &str) -> u64 {
    let d = c.ceph_json(&["osd", "dump"]).unwrap();
    d["osds"]
        .as_array()
        .and_then(|v| v.iter().find(|o| o["osd"] == id))
        .and_then(|o| o[field].as_u64())
        .unwrap_or(0)
}

fn is_up(c: &Cluster, id: u32) -> bool {
    osd_field(c, id, "up") == 1
}

fn pid_of(c: &Cluster, id: u32) -> u32 {
    c.daemons()
        .into_iter()
        .find(|(n, _)| *n == format!("osd.{id}"))
        .map(|(_, p)| p)
        .unwrap()
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// (up, acting, acting primary) of a PG, from the monitors.
fn pg_map(c: &Cluster, pgid: &str) -> (Vec<u32>, Vec<u32>, i64) {
    let v = c.ceph_json(&["pg", "map", pgid]).unwrap();
    let ids = |k: &str| -> Vec<u32> {
        v[k].as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_u64())
            .map(|x| x as u32)
            .collect()
    };
    let (up, acting) = (ids("up"), ids("acting"));
    let primary = v["acting_primary"]
        .as_i64()
        .or_else(|| acting.first().map(|&x| i64::from(x)))
        .unwrap_or(-1);
    (up, acting, primary)
}

fn pgids(pool: i64) -> Vec<String> {
    (0..PGS).map(|s| format!("{pool}.{s:x}")).collect()
}

fn osd_status(c: &Cluster, id: u32) -> serde_json::Value {
    let o = run(
        env_cmd(c, "ceph").args(["daemon", &format!("osd.{id}"), "status"]),
        Duration::from_secs(30),
    );
    serde_json::from_str(&o).unwrap()
}

/// Every PG of the pool: up == acting, three copies, every acting OSD up, and on the admin sockets of the acting
/// OSDs no PG in a transitional state; each primary counts at least as many `active+clean` PGs as it is the
/// primary of. (No mgr in these clusters: PG states come from the OSDs themselves.)
fn clean_now(c: &Cluster, pool: i64) -> Result<bool, String> {
    let mut primaries: BTreeMap<u32, usize> = BTreeMap::new();
    let mut members = std::collections::BTreeSet::new();
    for pgid in pgids(pool) {
        let (up, acting, primary) = pg_map(c, &pgid);
        if up != acting || acting.len() != 3 || primary < 0 {
            return Ok(false);
        }
        *primaries.entry(primary as u32).or_default() += 1;
        members.extend(acting);
    }
    for &id in &members {
        if !is_up(c, id) {
            return Ok(false);
        }
        let v = osd_status(c, id);
        let mut clean = 0;
        for (state, n) in v["pgs_by_state"].as_object().into_iter().flatten() {
            let n = n.as_u64().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let bad = state.split('+').any(|s| {
                matches!(
                    s,
                    "peering"
                        | "activating"
                        | "recovering"
                        | "recovery_wait"
                        | "backfilling"
                        | "backfill_wait"
                        | "degraded"
                        | "undersized"
                        | "remapped"
                        | "down"
                        | "incomplete"
                        | "peered"
                        | "creating"
                )
            });
            if bad {
                return Ok(false);
            }
            if state == "active+clean" {
                clean += n as usize;
            }
        }
        if clean < primaries.get(&id).copied().unwrap_or(0) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn wait_clean(c: &Cluster, pool: i64, timeout: Duration) {
    let t0 = Instant::now();
    c.wait_for("every PG of the pool active+clean", timeout, || {
        Ok(clean_now(c, pool).unwrap().then_some(()))
    })
    .unwrap();
    eprintln!("active+clean after {:.1} s", t0.elapsed().as_secs_f64());
}

fn digest(c: &Cluster, id: u32, pgid: &str) -> serde_json::Value {
    let t0 = Instant::now();
    let out = run(
        env_cmd(c, "ceph").args(["daemon", &format!("osd.{id}"), "ferro", "object-digest", pgid]),
        Duration::from_secs(60),
    );
    if t0.elapsed() > Duration::from_secs(5) {
        eprintln!(
            "object-digest {pgid} on osd.{id}: {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
    serde_json::from_str(&out).unwrap()
}

/// Compares the copies of every PG on its acting OSDs; returns the number of objects in the pool.
fn assert_replicas_identical(c: &Cluster, pool: i64) -> u64 {
    let mut objects = 0;
    for pgid in pgids(pool) {
        let (_, acting, _) = pg_map(c, &pgid);
        assert_eq!(acting.len(), 3, "pg {pgid}: acting {acting:?}");
        let d0 = digest(c, acting[0], &pgid);
        for &id in &acting[1..] {
            let d = digest(c, id, &pgid);
            assert_eq!(
                d["objects"], d0["objects"],
                "pg {pgid}: osd.{id} differs from osd.{}",
                acting[0]
            );
        }
        objects += d0["num_objects"].as_u64().unwrap();
    }
    objects
}

fn start_writer(c: &Cluster, pool: &str, seconds: u32, acks: &PathBuf) -> Child {
    start_writer_with(c, pool, seconds, acks, "")
}

/// [`start_writer`] with librados options for the writer (`FERRO_WRITER_CONF`, "key=value,key=value").
fn start_writer_with(c: &Cluster, pool: &str, seconds: u32, acks: &PathBuf, client_conf: &str) -> Child {
    let ackf = std::fs::File::create(acks).unwrap();
    Command::new("/usr/bin/python3")
        .arg(script("acked_writer.py"))
        .arg(c.conf_path())
        .arg(pool)
        .arg(seconds.to_string())
        .env("FERRO_WRITER_CONF", client_conf)
        .stdout(ackf)
        .spawn()
        .unwrap()
}

fn wait_child(child: &mut Child, what: &str, timeout: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("{what} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The longest a move may leave every write unanswered (from the change, between acknowledgements). A PG
/// that moves waits for up to three map epochs from the monitor and its peering; on a loaded machine (load
/// 15-25 with a disk-saturating writer beside) that kept the writer's 8 writes unanswered for up to 7 s, and a
/// single write took 1-7 s from the device flushes alone, so a rate per second is no measure there.
const MAX_ACK_GAP: Duration = Duration::from_secs(20);

/// The writer's librados options for a move: a client whose ops an OSD dropped without telling it learns the
/// new map only from its own laggy-op check (`objecter_timeout`, default 10 s, checked every 5 s). At 60 s
/// such a stall lasts a minute, far beyond [`MAX_ACK_GAP`] however loaded the machine, while an OSD that shares
/// its map as Ceph does never waits for that timer.
const MOVE_WRITER_CONF: &str = "objecter_timeout=60";

/// Waits for the writer like [`wait_child`], printing the acknowledged writes of every second; fails as soon as
/// no write has been acknowledged for [`MAX_ACK_GAP`] (counted from the call: the change just made). Returns
/// the exit status, the acknowledged writes of each full second and the longest wait for an acknowledgement.
fn wait_writer(
    child: &mut Child,
    acks: &PathBuf,
    timeout: Duration,
) -> (std::process::ExitStatus, Vec<usize>, Duration) {
    let start = Instant::now();
    let mut per_sec = Vec::new();
    let mut last = acked(acks);
    let mut next = Instant::now() + Duration::from_secs(1);
    let (mut seen, mut seen_at) = (last, start);
    let mut longest = Duration::ZERO;
    loop {
        let exited = child.try_wait().unwrap();
        let n = acked(acks);
        if n != seen {
            (seen, seen_at) = (n, Instant::now());
        }
        // until the writer exits: after its run it still waits for its last writes, and one stuck there
        // is a stall too
        let gap = seen_at.elapsed();
        longest = longest.max(gap);
        if let Some(s) = exited {
            eprintln!(
                "acknowledged writes per second: {per_sec:?}; longest wait for an acknowledgement {:.1} s",
                longest.as_secs_f64()
            );
            return (s, per_sec, longest);
        }
        if gap > MAX_ACK_GAP {
            let _ = child.kill();
            panic!(
                "writes stalled while PGs moved: none acknowledged for {:.1} s ({n} in all; per second {per_sec:?})",
                gap.as_secs_f64()
            );
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("writer did not finish within {timeout:?}");
        }
        if Instant::now() >= next {
            per_sec.push(n - last);
            last = n;
            next += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes must keep being acknowledged while PGs move (Ceph only holds ops on the object being recovered or
/// backfilled): [`wait_writer`] failed already if none was for [`MAX_ACK_GAP`]; here the load must have run
/// long enough after the change to tell. Before the OSD shared its newer map with clients, such a move
/// stalled writes until the client's laggy-op check (e.g. `[1, 0, 0, 0, 0, 0, 0, 0, 0, 0]` at the default
/// 10 s; a minute with [`MOVE_WRITER_CONF`]).
fn assert_writes_flow(per_sec: &[usize], longest: Duration) {
    assert!(
        per_sec.len() >= 5,
        "too short a load after the change: {per_sec:?}"
    );
    assert!(longest <= MAX_ACK_GAP, "{longest:?}");
}

/// Reading back every acknowledged write: writes no longer stall while PGs move, so there are 2-4x as many to
/// read back (one at a time).
const VERIFY_TIMEOUT: Duration = Duration::from_secs(240);

fn acked(acks: &PathBuf) -> usize {
    std::fs::read_to_string(acks).unwrap_or_default().lines().count()
}

/// Acceptance 1: A write is acknowledged only once all three replicas have it: with a (non-primary) replica of the
/// object's PG stopped (SIGSTOP, shorter than the heartbeat grace so that it stays in the acting set), a
/// `rados put` does not complete; after SIGCONT it does, and the three copies of the PG are identical.
#[test]
fn write_waits_for_every_replica() {
    let Some((c, _ids, pool)) = setup(3, "wp") else {
        return;
    };
    // The stopped replica must not be reported while stopped: this test's heartbeat grace is 6 s, we stop for 4.
    let dir = c.dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("payload");
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&src, &payload).unwrap();
    let m = c.ceph_json(&["osd", "map", "wp", "delayed"]).unwrap();
    let pgid = m["pgid"].as_str().unwrap().to_string();
    let primary = m["acting_primary"].as_u64().unwrap() as u32;
    let acting: Vec<u32> = m["acting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(acting.len(), 3, "{m}");
    let replica = *acting.iter().find(|&&o| o != primary).unwrap();
    eprintln!("object 'delayed' in pg {pgid}, primary osd.{primary}, stopping replica osd.{replica}");
    let pid = pid_of(&c, replica);
    signal(pid, "-STOP");
    let t0 = Instant::now();
    let mut put = env_cmd(&c, "rados")
        .args(["-p", "wp", "put", "delayed", src.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let early = put.try_wait().unwrap();
    signal(pid, "-CONT");
    assert!(
        early.is_none(),
        "the write completed ({early:?}) while replica osd.{replica} was stopped"
    );
    let st = wait_child(&mut put, "rados put", Duration::from_secs(60));
    assert!(st.success(), "rados put failed: {st:?}");
    eprintln!(
        "write acknowledged {:.1} s after it started (replica resumed at 4 s)",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        is_up(&c, replica),
        "the stopped replica was marked down: the test did not test the wait"
    );
    let out = dir.join("out");
    c.rados(
        &["-p", "wp", "get", "delayed", out.to_str().unwrap()],
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), payload);
    wait_clean(&c, pool, Duration::from_secs(60));
    let digests: Vec<_> = acting.iter().map(|&id| digest(&c, id, &pgid)).collect();
    for (d, id) in digests.iter().zip(&acting).skip(1) {
        assert_eq!(d["objects"], digests[0]["objects"], "pg {pgid}: osd.{id} differs");
    }
    let objs = digests[0]["objects"].to_string();
    assert!(objs.contains("delayed"), "object not in the digest: {objs}");
    assert_eq!(assert_replicas_identical(&c, pool), 1);
}

/// Acceptance 2: An OSD marked out under a write load: its PGs are remapped and backfilled to the fourth OSD, everything
/// ends active+clean, every acknowledged write reads back, the new acting sets hold identical copies.
#[test]
fn osd_marked_out_under_writes_is_backfilled_elsewhere() {
    let Some((c, ids, pool)) = setup_with_grace(4, "op", 20) else {
        return;
    };
    let t0 = Instant::now();
    let acks = c.dir().join("acks");
    let mut writer = start_writer_with(&c, "op", 12, &acks, MOVE_WRITER_CONF);
    std::thread::sleep(Duration::from_secs(3));
    let victim = ids[1];
    c.ceph(&["osd", "out", &victim.to_string()]).unwrap();
    let at_out = acked(&acks);
    let (st, per_sec, longest) = wait_writer(&mut writer, &acks, Duration::from_secs(90));
    assert!(st.success());
    assert_writes_flow(&per_sec, longest);
    let total = acked(&acks);
    eprintln!("{at_out} writes acknowledged at `osd out`, {total} in all");
    assert!(total > at_out, "no write acknowledged after the out");
    wait_clean(&c, pool, Duration::from_secs(120));
    for pgid in pgids(pool) {
        let (_, acting, _) = pg_map(&c, &pgid);
        assert!(
            !acting.contains(&victim),
            "pg {pgid} still on the out osd.{victim}"
        );
    }
    verify_acks(&c, "op", &acks, VERIFY_TIMEOUT);
    let objects = assert_replicas_identical(&c, pool);
    assert!(
        objects as usize >= total,
        "{objects} objects for {total} acknowledged writes"
    );
    eprintln!("osd out: done in {:.1} s", t0.elapsed().as_secs_f64());
}

/// Acceptance 3: A fresh OSD added under a write load: PGs remap onto it and are backfilled, active+clean, contents identical.
#[test]
fn fresh_osd_added_is_backfilled() {
    let Some((c, _ids, pool)) = setup_with_grace(3, "ap", 20) else {
        return;
    };
    let t0 = Instant::now();
    let acks = c.dir().join("acks");
    // Longer than the out test's load: adding an OSD (mkfs, auth, boot) can take ~9 s on a loaded machine, and the
    // writes must still run for several seconds after it is up.
    let mut writer = start_writer_with(&c, "ap", 20, &acks, MOVE_WRITER_CONF);
    std::thread::sleep(Duration::from_secs(3));
    let new = c.add_osd(&ferro()).unwrap();
    let at_add = acked(&acks);
    let (st, per_sec, longest) = wait_writer(&mut writer, &acks, Duration::from_secs(90));
    assert!(st.success());
    assert_writes_flow(&per_sec, longest);
    let total = acked(&acks);
    eprintln!("{at_add} writes acknowledged when osd.{new} came up, {total} in all");
    wait_clean(&c, pool, Duration::from_secs(120));
    let on_new = pgids(pool)
        .iter()
        .filter(|p| pg_map(&c, p).1.contains(&new))
        .count();
    eprintln!("{on_new} of {PGS} PGs now on osd.{new}");
    assert!(on_new > 0, "no PG moved to the new osd.{new}");
    verify_acks(&c, "ap", &acks, VERIFY_TIMEOUT);
    let objects = assert_replicas_identical(&c, pool);
    assert!(
        objects as usize >= total,
        "{objects} objects for {total} acknowledged writes"
    );
    eprintln!("osd added: done in {:.1} s", t0.elapsed().as_secs_f64());
}

/// Acceptance 4: Two of three replicas down (kill -9, marked down): a write and a read wait (no error) while the PG is below
/// min_size, and complete once one OSD returns; every acknowledged write is intact; after the second returns the
/// three copies are identical.
#[test]
fn two_of_three_down_io_waits_and_resumes() {
    let Some((c, ids, pool)) = setup(3, "dp") else {
        return;
    };
    let t0 = Instant::now();
    let f = ferro();
    let acks = c.dir().join("acks");
    let mut writer = start_writer(&c, "dp", 4, &acks);
    assert!(wait_child(&mut writer, "writer", Duration::from_secs(60)).success());
    let before = acked(&acks);
    assert!(before > 0);
    let dir = c.dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("payload");
    std::fs::write(&src, b"written while two replicas were down\n".repeat(500)).unwrap();
    let (a, b) = (ids[1], ids[2]);
    let up_before = (osd_field(&c, a, "up_from"), osd_field(&c, b, "up_from"));
    assert!(c.kill_daemon(&format!("osd.{a}")).unwrap());
    assert!(c.kill_daemon(&format!("osd.{b}")).unwrap());
    c.ceph(&["osd", "down", &a.to_string(), &b.to_string()]).unwrap();
    c.wait_for("both killed OSDs down", Duration::from_secs(30), || {
        Ok((!is_up(&c, a) && !is_up(&c, b)).then_some(()))
    })
    .unwrap();
    let mut put = env_cmd(&c, "rados")
        .args(["-p", "dp", "put", "waiting", src.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first = std::fs::read_to_string(&acks)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string();
    let got = dir.join("got");
    let mut get = env_cmd(&c, "rados")
        .args(["-p", "dp", "get", &first, got.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(6));
    let (pw, pg) = (put.try_wait().unwrap(), get.try_wait().unwrap());
    assert!(
        pw.is_none(),
        "a write completed ({pw:?}) with two of three replicas down"
    );
    assert!(
        pg.is_none(),
        "a read completed ({pg:?}) with two of three replicas down"
    );
    eprintln!("write and read waiting with two of three OSDs down");
    let t_back = Instant::now();
    c.restart_osd(a, &f).unwrap();
    assert!(wait_child(&mut put, "the waiting write", Duration::from_secs(90)).success());
    assert!(wait_child(&mut get, "the waiting read", Duration::from_secs(90)).success());
    eprintln!(
        "waiting I/O completed {:.1} s after osd.{a} was restarted",
        t_back.elapsed().as_secs_f64()
    );
    assert!(osd_field(&c, a, "up_from") > up_before.0);
    verify_acks(&c, "dp", &acks, VERIFY_TIMEOUT);
    c.restart_osd(b, &f).unwrap();
    assert!(osd_field(&c, b, "up_from") > up_before.1);
    wait_clean(&c, pool, Duration::from_secs(120));
    let out = dir.join("out");
    c.rados(
        &["-p", "dp", "get", "waiting", out.to_str().unwrap()],
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&src).unwrap());
    verify_acks(&c, "dp", &acks, VERIFY_TIMEOUT);
    let objects = assert_replicas_identical(&c, pool);
    assert!(
        objects as usize > before,
        "{objects} objects for {} acknowledged writes",
        before + 1
    );
    eprintln!("two down: done in {:.1} s", t0.elapsed().as_secs_f64());
}

/// Acceptance 5: Soak (not in CI; `scripts/soak-replication.sh [MINUTES]`): FERRO_SOAK_MINUTES (default 10) of a write
/// load on 4 ferro-osds while one random OSD at a time is killed -9, kept down a random 2–10 s and restarted;
/// between kills the cluster is given up to 90 s to get clean. At the end: zero lost or corrupt acknowledged
/// writes and identical replicas. FERRO_SOAK_SEED picks the kill sequence.
#[test]
#[ignore = "soak: run scripts/soak-replication.sh [MINUTES]"]
fn soak_random_kills_under_load() {
    let minutes: f64 = std::env::var("FERRO_SOAK_MINUTES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let mut seed: u64 = std::env::var("FERRO_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("soak: {minutes} min, FERRO_SOAK_SEED={seed}");
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let Some((c, ids, pool)) = setup(4, "sp") else {
        return;
    };
    let f = ferro();
    let acks = c.dir().join("acks");
    let secs = (minutes * 60.0).max(20.0) as u32;
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(u64::from(secs));
    let mut writer = start_writer(&c, "sp", secs, &acks);
    let mut kills = 0;
    let mut clean_times = Vec::new();
    let mut not_clean = 0;
    std::thread::sleep(Duration::from_secs(3));
    while Instant::now() + Duration::from_secs(15) < end {
        let victim = ids[rand(ids.len() as u64) as usize];
        let before = osd_field(&c, victim, "up_from");
        assert!(c.kill_daemon(&format!("osd.{victim}")).unwrap());
        kills += 1;
        let down = 2 + rand(9);
        eprintln!(
            "[{:>5.1} s] kill -9 osd.{victim} ({} acked so far), down {down} s",
            t0.elapsed().as_secs_f64(),
            acked(&acks)
        );
        std::thread::sleep(Duration::from_secs(down));
        c.restart_osd(victim, &f).unwrap();
        assert!(osd_field(&c, victim, "up_from") > before);
        let tc = Instant::now();
        let clean = c.wait_for("clean between kills", Duration::from_secs(90), || {
            Ok(clean_now(&c, pool).unwrap().then_some(()))
        });
        match clean {
            Ok(()) => clean_times.push(tc.elapsed().as_secs_f64()),
            Err(e) => {
                not_clean += 1;
                eprintln!("not clean 90 s after restarting osd.{victim}: {e}");
            }
        }
        std::thread::sleep(Duration::from_secs(1 + rand(5)));
    }
    let st = wait_child(&mut writer, "writer", Duration::from_secs(u64::from(secs) + 120));
    assert!(st.success());
    let total = acked(&acks);
    wait_clean(&c, pool, Duration::from_secs(180));
    let v = verify_acks(&c, "sp", &acks, VERIFY_TIMEOUT);
    let objects = assert_replicas_identical(&c, pool);
    let max_clean = clean_times.iter().copied().fold(0.0, f64::max);
    let avg_clean = clean_times.iter().sum::<f64>() / clean_times.len().max(1) as f64;
    println!(
        "SOAK SUMMARY: {:.1} min, {kills} kill -9/restart cycles on 4 OSDs, {total} acknowledged writes, {v}; \
         {objects} objects, replicas identical in all {PGS} PGs; back to active+clean after a restart: \
         avg {avg_clean:.1} s, max {max_clean:.1} s, {not_clean} times not within 90 s",
        t0.elapsed().as_secs_f64() / 60.0
    );
    assert_eq!(not_clean, 0, "the cluster did not get clean after a restart");
    assert!(objects as usize >= total);
}
