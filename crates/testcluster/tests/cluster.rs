// SPDX-License-Identifier: LGPL-3.0-or-later
//! Acceptance: a cluster with one classic OSD comes up (mon in quorum, mgr active, OSD up, cephx on,
//! loopback only), serves I/O, hands out the binary maps, and leaves no process or directory behind.

use std::path::Path;
use std::time::{Duration, Instant};

use testcluster::{Cluster, ClusterSpec};

fn proc_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

#[test]
fn one_osd_cluster_comes_up_serves_io_and_cleans_up() {
    let t0 = Instant::now();
    let Some(cluster) = testcluster::start_or_skip(ClusterSpec::default().classic_osds(1)) else {
        return;
    };
    eprintln!(
        "cluster with 1 classic OSD started in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    let status = cluster.ceph_json(&["status"]).unwrap();
    assert_eq!(status["fsid"], cluster.fsid());
    assert_eq!(status["quorum_names"], serde_json::json!(["a"]), "{status}");
    assert_eq!(status["mgrmap"]["available"], true, "{status}");
    assert_eq!(status["osdmap"]["num_osds"], 1, "{status}");
    assert_eq!(status["osdmap"]["num_up_osds"], 1, "{status}");

    // cephx is enforced for every kind of peer, and nothing listens beyond loopback.
    let conf = std::fs::read_to_string(cluster.conf_path()).unwrap();
    for kind in ["cluster", "service", "client"] {
        assert!(conf.contains(&format!("auth {kind} required = cephx")), "{conf}");
    }
    let mon_addr = cluster.mon_addr();
    assert!(mon_addr.ip().is_loopback());
    assert_eq!(cluster.mon_host(), format!("v2:{mon_addr}"));
    let dump = cluster.ceph_json(&["osd", "dump"]).unwrap();
    let osd0 = &dump["osds"][0];
    for addr in osd0["public_addrs"]["addrvec"].as_array().unwrap() {
        assert!(addr["addr"].as_str().unwrap().starts_with("127.0.0.1:"), "{osd0}");
        assert_eq!(addr["type"], "v2", "msgr1 is off: {osd0}");
    }

    // A pool, real I/O through the classic OSD.
    let pool = cluster.create_pool("t", 8).unwrap();
    assert!(pool > 0);
    assert_eq!(cluster.pool_id("t").unwrap(), pool);
    cluster.wait_for_clean(Duration::from_secs(60)).unwrap();
    let src = cluster.dir().join("tmp").join("obj-in");
    std::fs::write(&src, b"hello ferroceph").unwrap();
    let dst = cluster.dir().join("tmp").join("obj-out");
    let (s, d) = (src.to_str().unwrap(), dst.to_str().unwrap());
    cluster
        .rados(&["-p", "t", "put", "o1", s], Duration::from_secs(30))
        .unwrap();
    cluster
        .rados(&["-p", "t", "get", "o1", d], Duration::from_secs(30))
        .unwrap();
    assert_eq!(std::fs::read(&dst).unwrap(), b"hello ferroceph");

    // Binary maps: non-empty, and each starts with a versioned-encoding header
    // (u8 struct_v, u8 compat, u32 length covering the rest).
    for (what, bytes) in [
        ("monmap", cluster.mon_map_bytes().unwrap()),
        ("osdmap", cluster.osd_map_bytes(None).unwrap()),
    ] {
        assert!(bytes.len() > 6, "{what} too short");
        let len = u32::from_le_bytes(bytes[2..6].try_into().unwrap()) as usize;
        assert_eq!(
            len + 6,
            bytes.len(),
            "{what}: envelope length must cover the whole map"
        );
    }
    let epoch = dump["epoch"].as_u64().unwrap() as u32;
    assert!(!cluster.osd_map_bytes(Some(epoch)).unwrap().is_empty());
    let crush = cluster.crush_map_bytes().unwrap();
    // CRUSH_MAGIC, little-endian.
    assert_eq!(&crush[..4], &0x0001_0000u32.to_le_bytes());

    // Teardown: every recorded process is gone, the directory too.
    let dir = cluster.dir().to_owned();
    let daemons = cluster.daemons();
    assert_eq!(
        daemons.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["mon.a", "mgr.x", "osd.0"],
        "daemons: {daemons:?}"
    );
    for (name, pid) in &daemons {
        assert!(proc_alive(*pid), "{name} ({pid}) should be running");
    }
    drop(cluster);
    for (name, pid) in &daemons {
        assert!(!proc_alive(*pid), "{name} ({pid}) survived the drop");
    }
    assert!(!dir.exists(), "{} should be removed", dir.display());
}

#[test]
fn detached_cluster_survives_its_handle_and_stop_dir_kills_it() {
    if !testcluster::ceph_or_skip() {
        return;
    }
    let base = std::env::temp_dir().join(format!("ferro-detached-test.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    // If an assertion fails, still stop the detached daemons.
    struct StopOnDrop(std::path::PathBuf);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            let _ = Cluster::stop_dir(&self.0);
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _stop = StopOnDrop(base.clone());
    // No OSD: this test is about process ownership, and the other test covers OSDs.
    // No mgr: process ownership is the point here, and the mgr is the slowest daemon to start.
    let c = Cluster::start_detached(&base, &ClusterSpec::default().without_mgr()).unwrap();
    let mut daemons = c.daemons();
    daemons.sort();
    drop(c);
    assert_eq!(daemons.len(), 1);
    for (name, pid) in &daemons {
        assert!(proc_alive(*pid), "{name} must outlive a detached handle");
    }
    // Another handle on the same directory sees the same cluster.
    let again = Cluster::open(&base).unwrap();
    let mut seen = again.daemons();
    seen.sort();
    assert_eq!(seen, daemons);
    assert_eq!(
        again.ceph_json(&["mon", "stat"]).unwrap()["quorum"][0]["name"],
        "a"
    );
    // A running cluster directory is not reused.
    assert!(Cluster::start_detached(&base, &ClusterSpec::default()).is_err());
    // A process started by hand with the cluster's marker (as scripts do for extra daemons) belongs to it.
    let mut extra = std::process::Command::new("sleep")
        .arg("300")
        .env(testcluster::MARKER_ENV, again.dir())
        .spawn()
        .unwrap();

    // spawn() can return before the child's exec has replaced its environment: wait (bounded) until the marker
    // is visible in /proc, as it is for any daemon a script started earlier.
    let marker = format!("{}={}", testcluster::MARKER_ENV, again.dir().display());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read(format!("/proc/{}/environ", extra.id()))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .any(|kv| kv == marker.as_bytes())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the marked process never showed its marker"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(Cluster::stop_dir(&base).unwrap(), 2);
    assert!(
        !extra.wait().unwrap().success(),
        "the marked process must have been killed"
    );
    for (name, pid) in &daemons {
        assert!(!proc_alive(*pid), "{name} ({pid}) survived stop_dir");
    }
    assert_eq!(
        Cluster::stop_dir(&base).unwrap(),
        0,
        "a second stop finds nothing"
    );
}

#[test]
fn start_detached_refuses_a_foreign_non_empty_directory() {
    let base = std::env::temp_dir().join(format!("ferro-foreign-test.{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("precious"), b"user data").unwrap();
    let err = Cluster::start_detached(&base, &ClusterSpec::default()).unwrap_err();
    assert!(err.to_string().contains("refusing to wipe"), "{err}");
    assert_eq!(std::fs::read(base.join("precious")).unwrap(), b"user data");
    std::fs::remove_dir_all(Path::new(&base)).unwrap();
}

#[test]
fn a_panicking_test_still_kills_its_daemons() {
    if !testcluster::ceph_or_skip() {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let joined = std::thread::spawn(move || {
        let c = Cluster::start(ClusterSpec::default().without_mgr()).unwrap();
        tx.send((c.dir().to_owned(), c.daemons())).unwrap();
        panic!("deliberate panic with a live cluster");
    })
    .join();
    assert!(joined.is_err(), "the thread must have panicked");
    let (dir, daemons) = rx.recv().unwrap();
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    for (name, pid) in &daemons {
        assert!(!proc_alive(*pid), "{name} ({pid}) survived the panic");
    }
    assert!(!dir.exists(), "{} should be removed", dir.display());
}

#[test]
fn concurrent_clusters_get_their_own_ports_and_dirs() {
    if !testcluster::ceph_or_skip() {
        return;
    }
    let starts: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(|| Cluster::start(ClusterSpec::default().without_mgr()).unwrap()))
        .collect();
    let clusters: Vec<Cluster> = starts.into_iter().map(|h| h.join().unwrap()).collect();
    assert_ne!(clusters[0].mon_addr(), clusters[1].mon_addr());
    assert_ne!(clusters[0].dir(), clusters[1].dir());
    assert_ne!(clusters[0].fsid(), clusters[1].fsid());
    for c in &clusters {
        // Each CLI call reaches its own cluster (the fsid tells them apart).
        assert_eq!(c.ceph_json(&["status"]).unwrap()["fsid"], c.fsid());
    }
}

#[test]
fn a_taken_mon_port_is_retried_on_another_one() {
    if !testcluster::ceph_or_skip() {
        return;
    }
    // Another "cluster" holds the port we ask for first.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap().port();
    let spec = ClusterSpec {
        mon_port: Some(taken),
        ..ClusterSpec::default().without_mgr()
    };
    let c = Cluster::start(spec).unwrap();
    assert_ne!(c.mon_addr().port(), taken);
    assert_eq!(c.ceph_json(&["status"]).unwrap()["fsid"], c.fsid());
    // Without a mgr, PG states are unavailable: a clear error at once, not a hang.
    let t0 = Instant::now();
    let err = c.wait_for_clean(Duration::from_secs(30)).unwrap_err();
    assert!(err.to_string().contains("needs a mgr"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    // Commands that print nothing give Null rather than a parse error.
    assert_eq!(
        c.ceph_json(&["osd", "pool", "create", "q", "4", "4"]).unwrap(),
        serde_json::Value::Null
    );
}

#[test]
fn a_cluster_left_by_a_killed_test_process_is_reaped_by_the_next_start() {
    if !testcluster::ceph_or_skip() {
        return;
    }
    // Looks like a guard directory whose owner died: pid 1 with a start time that is not pid 1's.
    let tmp = std::env::var_os("TMPDIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/tmp".into());
    let stale = tmp.join(format!("ferro-cluster.stale-test.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stale);
    let c = Cluster::start_detached(&stale, &ClusterSpec::default().without_mgr()).unwrap();
    let daemons = c.daemons();
    drop(c);
    std::fs::write(stale.join("owner"), "1 0\n").unwrap();

    let fresh = Cluster::start(ClusterSpec::default().without_mgr()).unwrap();
    for (name, pid) in &daemons {
        assert!(!proc_alive(*pid), "stale {name} ({pid}) was not reaped");
    }
    assert!(
        !stale.exists(),
        "stale directory {} was not removed",
        stale.display()
    );
    drop(fresh);
}

/// An OSD kind whose daemon dies at once: exercises the launcher seam and early failure reporting.
struct DiesAtOnce;

impl testcluster::OsdLauncher for DiesAtOnce {
    fn kind(&self) -> &str {
        "dies-at-once"
    }
    fn prepare(&self, ctx: &testcluster::OsdContext) -> testcluster::Result<()> {
        // The cluster registered the OSD and wrote its key before calling us.
        let keyring = std::fs::read_to_string(&ctx.keyring).unwrap_or_default();
        assert!(keyring.starts_with(&format!("[osd.{}]\n", ctx.id)), "{keyring}");
        assert!(ctx.data_dir.ends_with(format!("osd.{}", ctx.id)));
        Ok(())
    }
    fn command(&self, ctx: &testcluster::OsdContext) -> std::process::Command {
        let mut cmd = std::process::Command::new("sh");
        cmd.args([
            "-c",
            &format!("echo 'osd.{} cannot start: boom' >&2; exit 3", ctx.id),
        ]);
        cmd
    }
}

#[test]
fn an_osd_that_dies_fails_add_osd_fast_with_its_output() {
    if !testcluster::ceph_or_skip() {
        return;
    }
    let c = Cluster::start(ClusterSpec::default().without_mgr()).unwrap();
    let t0 = Instant::now();
    let err = c.add_osd(&DiesAtOnce).unwrap_err();
    assert!(
        matches!(err, testcluster::ClusterError::DaemonDied { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("osd.0 cannot start: boom"), "{text}");
    assert!(t0.elapsed() < Duration::from_secs(30), "took {:?}", t0.elapsed());
}
