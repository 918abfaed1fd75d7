// SPDX-License-Identifier: LGPL-3.0-or-later
//! End to end: a real Ceph 16.2 mon + mgr (crate testcluster) and ferro-osd OSDs, driven by unmodified Ceph
//! clients: the `rados` CLI, `rados bench`, fio's rados engine, python3-rados and `ceph` / `ceph daemon`.
//! Skips when Ceph is not installed (unless FERRO_REQUIRE_CLUSTER is set). Each test runs its own cluster.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use testcluster::{Cluster, ClusterSpec, FerroOsd};

mod live;
use live::{ferro_size3_pool, python_available, run, script, verify_acks, wait_active_clean};

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

fn up_from(c: &Cluster, id: u32) -> u64 {
    let d = c.ceph_json(&["osd", "dump"]).unwrap();
    d["osds"]
        .as_array()
        .and_then(|v| v.iter().find(|o| o["osd"] == id))
        .and_then(|o| o["up_from"].as_u64())
        .unwrap_or(0)
}

#[test]
fn ferro_osd_serves_unmodified_clients() {
    let Some(c) = testcluster::start_or_skip(ClusterSpec::default().conf("mgr", "mgr stats period", "1"))
    else {
        return;
    };
    let id = c.add_osd(&ferro()).unwrap();
    c.create_pool("fp", 16).unwrap();
    wait_active_clean(&c, Duration::from_secs(30));
    let t = Duration::from_secs(30);
    let dir = c.dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("in");
    std::fs::write(&src, b"hello ferro\n").unwrap();
    let rados = |args: &[&str]| {
        let mut v = vec!["-p", "fp"];
        v.extend_from_slice(args);
        c.rados(&v, t).unwrap()
    };
    let p = |p: &Path| p.to_string_lossy().to_string();

    // The rados CLI.
    rados(&["put", "obj1", &p(&src)]);
    let out = dir.join("out");
    rados(&["get", "obj1", &p(&out)]);
    assert_eq!(std::fs::read(&out).unwrap(), b"hello ferro\n");
    assert!(rados(&["stat", "obj1"]).contains("size 12"));
    assert!(rados(&["ls"]).lines().any(|l| l == "obj1"));
    rados(&["setxattr", "obj1", "color", "blue"]);
    assert_eq!(rados(&["getxattr", "obj1", "color"]), "blue");
    assert!(rados(&["listxattr", "obj1"]).contains("color"));
    rados(&["setomapval", "obj1", "k1", "v1"]);
    rados(&["setomapval", "obj1", "k2", "v2"]);
    assert_eq!(rados(&["listomapkeys", "obj1"]), "k1\nk2\n");
    assert!(rados(&["listomapvals", "obj1"]).contains("k2"));
    rados(&["rmomapkey", "obj1", "k1"]);
    assert_eq!(rados(&["listomapkeys", "obj1"]), "k2\n");
    rados(&["append", "obj1", &p(&src)]);
    assert!(rados(&["stat", "obj1"]).contains("size 24"));
    rados(&["truncate", "obj1", "5"]);
    rados(&["get", "obj1", &p(&out)]);
    assert_eq!(std::fs::read(&out).unwrap(), b"hello");

    // cephx caps are enforced: a read-only client reads but gets EPERM on writes.
    let ro_keyring = dir.join("ro.keyring");
    c.ceph(&[
        "auth",
        "get-or-create",
        "client.ro",
        "mon",
        "allow r",
        "osd",
        "allow r pool=fp",
        "-o",
        &p(&ro_keyring),
    ])
    .unwrap();
    let ro = |args: &[&str]| {
        env_cmd(&c, "rados")
            .args(["--id", "ro", "--keyring", &p(&ro_keyring), "-p", "fp"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = ro(&["stat", "obj1"]);
    assert!(o.status.success(), "read-only client can stat: {o:?}");
    let o = ro(&["put", "obj2", &p(&src)]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(err.contains("Operation not permitted"), "{err}");

    rados(&["rm", "obj1"]);
    assert!(c.rados(&["-p", "fp", "stat", "obj1"], t).is_err());

    // python3-rados: every op the binding exposes.
    if python_available() {
        let o = run(
            Command::new("/usr/bin/python3")
                .arg(script("rados_ops.py"))
                .arg(c.conf_path())
                .arg("fp"),
            Duration::from_secs(60),
        );
        assert!(o.starts_with("ok:"), "{o}");
        eprintln!("python3-rados: {}", o.trim());
    }

    // Defragment on read: an object scattered by overwrites reads back intact, and the OSD rewrote it as one run.
    if python_available() {
        let o = run(
            Command::new("/usr/bin/python3")
                .arg(script("scattered_read.py"))
                .arg(c.conf_path())
                .arg("fp"),
            Duration::from_secs(60),
        );
        assert!(o.starts_with("ok:"), "{o}");
        // The counters are the cores' statistics snapshots (one a second): wait for one taken after the reads.
        let fs = c.wait_for(
            "perf dump to count the rewrite of the scattered object",
            Duration::from_secs(10),
            || {
                let o = run(
                    env_cmd(&c, "ceph").args(["daemon", &format!("osd.{id}"), "perf", "dump"]),
                    t,
                );
                let v: serde_json::Value = serde_json::from_str(&o).unwrap();
                let fs = v["ferrostore"].clone();
                Ok((fs["defrag_txns"].as_u64() >= Some(1)).then_some(fs))
            },
        );
        let fs = fs.unwrap();
        eprintln!("defragment on read: {fs}");
        assert!(fs["defrag_blocks"].as_u64() >= Some(100), "{fs}");
        // By default a range is rewritten on its second scattered read: the first was only counted.
        assert!(fs["defrag_deferred"].as_u64() >= Some(1), "{fs}");
    }

    // rados bench write / seq / rand.
    for mode in ["write", "seq", "rand"] {
        let mut args = vec!["-p", "fp", "bench", "1", mode, "-t", "8"];
        if mode == "write" {
            args.extend(["-b", "65536", "--no-cleanup"]);
        }
        let o = c.rados(&args, Duration::from_secs(60)).unwrap();
        let bw = o
            .lines()
            .find(|l| l.starts_with("Bandwidth"))
            .unwrap_or("?")
            .to_string();
        let iops = o
            .lines()
            .find(|l| l.starts_with("Average IOPS"))
            .unwrap_or("?")
            .to_string();
        eprintln!("rados bench {mode}: {bw}, {iops}");
        assert!(!o.contains("error"), "{o}");
    }

    // fio with the rados engine.
    if testcluster::which("fio").is_some() {
        for rw in ["randwrite", "randread"] {
            let o = run(
                env_cmd(&c, "fio").args([
                    "--name=ferro",
                    "--ioengine=rados",
                    &format!("--conf={}", c.conf_path().display()),
                    "--clientname=admin",
                    "--pool=fp",
                    &format!("--rw={rw}"),
                    "--bs=4k",
                    "--size=8m",
                    "--runtime=1",
                    "--time_based",
                    "--iodepth=8",
                ]),
                Duration::from_secs(60),
            );
            let line = o
                .lines()
                .find(|l| l.contains("IOPS="))
                .unwrap_or("?")
                .trim()
                .to_string();
            eprintln!("fio {rw}: {line}");
            assert!(line.contains("IOPS="), "{o}");
        }
    }

    // Cluster views.
    wait_active_clean(&c, Duration::from_secs(30));
    let s = c.ceph_json(&["-s"]).unwrap();
    assert_eq!(s["osdmap"]["num_up_osds"], 1);
    assert_eq!(s["osdmap"]["num_in_osds"], 1);
    let df = c.ceph_json(&["osd", "df"]).unwrap();
    let node = &df["nodes"][0];
    assert!(node["kb"].as_u64().unwrap() > 0, "{df}");
    assert_eq!(node["pgs"], 17, "{df}");
    let meta = c.ceph_json(&["osd", "metadata", &id.to_string()]).unwrap();
    assert_eq!(meta["osd_objectstore"], "ferrostore");
    for k in [
        "arch",
        "ceph_version",
        "hostname",
        "front_addr",
        "back_addr",
        "hb_front_addr",
        "mem_total_kb",
    ] {
        assert!(
            meta[k].as_str().is_some_and(|v| !v.is_empty()),
            "metadata {k}: {meta}"
        );
    }
    c.ceph(&["osd", "perf"]).unwrap();
    // Perf counters reach the mgr (schema declared in MMgrReport, values packed in its order): its status
    // module computes `ceph osd status` rates from osd.op_w / osd.op_in_bytes, so a write load shows there.
    let mut bench = env_cmd(&c, "rados")
        .args([
            "-p",
            "fp",
            "bench",
            "8",
            "write",
            "-b",
            "4096",
            "-t",
            "4",
            "--no-cleanup",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let seen = c.wait_for(
        "ceph osd status to show ferro-osd's write rate",
        Duration::from_secs(20),
        || {
            // The table (Pacific's status module ignores --format here): ID HOST USED AVAIL WR_OPS WR_DATA ...
            let st = c.ceph(&["osd", "status"])?;
            let wr = st
                .lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .find(|w| w.first() == Some(&id.to_string().as_str()))
                .and_then(|w| w.get(4).and_then(|x| x.parse::<f64>().ok()))
                .unwrap_or(0.0);
            Ok((wr > 0.0).then_some(wr))
        },
    );
    let _ = bench.kill();
    let _ = bench.wait();
    eprintln!("ceph osd status: osd.{id} wr_ops {:?}", seen.as_ref().ok());
    seen.unwrap();
    // `ceph tell` goes over the network (MCommand on a client connection).
    let v: serde_json::Value =
        serde_json::from_str(&c.ceph(&["tell", &format!("osd.{id}"), "version"]).unwrap()).unwrap();
    assert_eq!(v["release"], "pacific");

    // The admin socket through `ceph daemon`.
    for cmd in [
        &["status"][..],
        &["perf", "dump"],
        &["config", "show"],
        &["dump_ops_in_flight"],
    ] {
        let mut args = vec!["daemon".to_string(), format!("osd.{id}")];
        args.extend(cmd.iter().map(|s| s.to_string()));
        let o = run(env_cmd(&c, "ceph").args(&args), Duration::from_secs(30));
        let v: serde_json::Value = serde_json::from_str(&o).unwrap_or_else(|e| panic!("{cmd:?}: {e}: {o}"));
        if cmd == ["status"] {
            assert_eq!(v["state"], "active");
            assert_eq!(v["num_pgs"], 17);
        }
        if cmd == ["perf", "dump"] {
            // The rados bench above: client op latencies are counted (op_wip is checked below, with an op
            // that stays in flight).
            for k in ["op_latency", "op_w_latency", "commit_latency"] {
                assert!(v["osd"][k]["avgcount"].as_u64() > Some(0), "{k}: {v}");
                assert!(v["osd"][k]["avgtime"].as_f64() > Some(0.0), "{k}: {v}");
            }
        }
        if cmd == ["dump_ops_in_flight"] {
            assert_eq!(v["num_ops"].as_u64(), v["ops"].as_array().map(|a| a.len() as u64));
        }
    }
    // The last 20 completed ops (the rados bench writes), with ceph-osd's fields.
    let hist: serde_json::Value = serde_json::from_str(&run(
        env_cmd(&c, "ceph").args(["daemon", &format!("osd.{id}"), "dump_historic_ops"]),
        Duration::from_secs(30),
    ))
    .unwrap();
    let hops = hist["ops"].as_array().unwrap();
    assert!(!hops.is_empty() && hops.len() <= 20, "{hist}");
    assert!(
        hops.iter().any(|o| o["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("osd_op(client.") && d.contains("write 0~4096]"))),
        "{hist}"
    );
    for o in hops {
        assert!(o["duration"].as_f64() > Some(0.0), "{o}");
        assert_eq!(o["type_data"]["flag_point"], "done", "{o}");
    }
    // The slowest completed ops of the last 600 s, slowest first, none faster than the newest history's fastest
    // could push out.
    let slow: serde_json::Value = serde_json::from_str(&run(
        env_cmd(&c, "ceph").args(["daemon", &format!("osd.{id}"), "dump_historic_ops_by_duration"]),
        Duration::from_secs(30),
    ))
    .unwrap();
    assert_eq!(
        (slow["size"].as_u64(), slow["duration"].as_u64()),
        (Some(20), Some(600)),
        "{slow}"
    );
    let sops = slow["ops"].as_array().unwrap();
    assert_eq!(
        sops.len(),
        20,
        "the rados bench completed more than 20 ops: {slow}"
    );
    let durs: Vec<f64> = sops.iter().filter_map(|o| o["duration"].as_f64()).collect();
    assert_eq!(durs.len(), 20, "{slow}");
    assert!(durs.windows(2).all(|w| w[0] >= w[1]), "slowest first: {durs:?}");
    let newest_max = hops
        .iter()
        .filter_map(|o| o["duration"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        durs[0] >= newest_max,
        "the slowest op kept is at least as slow as any recent one: {durs:?} vs {newest_max}"
    );

    // A pool resized to 3 copies and min_size 2 with one OSD is below min_size: its PGs stay peered, not
    // active (Ceph's rule), so a write is not acknowledged with a single copy (it waits; the client times out).
    c.ceph(&["osd", "pool", "set", "fp", "size", "3", "--yes-i-really-mean-it"])
        .unwrap();
    c.ceph(&["osd", "pool", "set", "fp", "min_size", "2"]).unwrap();
    c.wait_for("the resized pool's PGs to leave active", t, || {
        let o = run(
            env_cmd(&c, "ceph").args(["daemon", &format!("osd.{id}"), "status"]),
            t,
        );
        let v: serde_json::Value = serde_json::from_str(&o).unwrap();
        let active: u64 = v["pgs_by_state"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.split('+').any(|s| s == "active"))
                    .filter_map(|(_, n)| n.as_u64())
                    .sum()
            })
            .unwrap_or(0);
        // Only the mgr's size-1 pool PG stays active.
        Ok((active == 1).then_some(()))
    })
    .unwrap();
    let put = env_cmd(&c, "rados")
        .args([
            "--rados-osd-op-timeout",
            "6",
            "-p",
            "fp",
            "put",
            "resized",
            &p(&src),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While the write waits for an active PG, the admin socket lists it in flight (as ceph-osd does) and
    // op_wip counts it (statistics reach core 0 every second).
    let inflight = c.wait_for(
        "the waiting write in dump_ops_in_flight",
        Duration::from_secs(5),
        || {
            let o = run(
                env_cmd(&c, "ceph").args(["daemon", &format!("osd.{id}"), "dump_ops_in_flight"]),
                t,
            );
            let v: serde_json::Value = serde_json::from_str(&o).unwrap();
            Ok(v["ops"]
                .as_array()
                .and_then(|a| {
                    a.iter().find(|op| {
                        op["description"]
                            .as_str()
                            .is_some_and(|d| d.contains(" resized ["))
                    })
                })
                .cloned())
        },
    );
    let op_wip = c.wait_for(
        "op_wip to count the waiting write",
        Duration::from_secs(4),
        || {
            let o = run(
                env_cmd(&c, "ceph").args(["daemon", &format!("osd.{id}"), "perf", "dump"]),
                t,
            );
            let v: serde_json::Value = serde_json::from_str(&o).unwrap();
            Ok(v["osd"]["op_wip"].as_u64().filter(|&n| n >= 1))
        },
    );
    let put = put.wait_with_output().unwrap();
    assert!(
        !put.status.success(),
        "a write to a size-3 pool was acknowledged by a lone ferro-osd"
    );
    let inflight = inflight.unwrap();
    eprintln!("dump_ops_in_flight entry: {inflight}");
    assert!(inflight["age"].as_f64() > Some(0.0), "{inflight}");
    assert_eq!(inflight["type_data"]["flag_point"], "reached pg", "{inflight}");
    assert!(
        inflight["description"].as_str().unwrap().contains("writefull 0~"),
        "{inflight}"
    );
    assert!(
        inflight["initiated_at"].as_str().unwrap().ends_with("+0000"),
        "{inflight}"
    );
    op_wip.unwrap();
}

#[test]
fn kill_9_during_writes_loses_no_acknowledged_write() {
    if !python_available() {
        eprintln!("skipping: python3-rados not available");
        return;
    }
    let Some(c) = testcluster::start_or_skip(ClusterSpec::default().without_mgr()) else {
        return;
    };
    let f = ferro();
    let id = c.add_osd(&f).unwrap();
    c.create_pool("kp", 8).unwrap();
    let acks = c.dir().join("tmp-acks");
    let ackf = std::fs::File::create(&acks).unwrap();
    let mut writer = Command::new("/usr/bin/python3")
        .arg(script("acked_writer.py"))
        .arg(c.conf_path())
        .arg("kp")
        .arg("8")
        .stdout(ackf)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let before = up_from(&c, id);
    assert!(c.kill_daemon(&format!("osd.{id}")).unwrap());
    let acked_at_kill = std::fs::read_to_string(&acks).unwrap().lines().count();
    std::thread::sleep(Duration::from_millis(500));
    c.restart_osd(id, &f).unwrap();
    c.wait_for("osd restarted", Duration::from_secs(60), || {
        Ok((up_from(&c, id) > before).then_some(()))
    })
    .unwrap();
    let start = Instant::now();
    loop {
        if writer.try_wait().unwrap().is_some() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "writer did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    let total = std::fs::read_to_string(&acks).unwrap().lines().count();
    eprintln!("{acked_at_kill} writes acknowledged before kill -9, {total} in all");
    assert!(acked_at_kill > 0);
    let o = run(
        Command::new("/usr/bin/python3")
            .arg(script("acked_writer.py"))
            .arg(c.conf_path())
            .arg("kp")
            .arg("--verify")
            .arg(&acks),
        Duration::from_secs(60),
    );
    eprintln!("{}", o.trim());
    assert!(o.contains(", 0 bad"), "{o}");
}

/// A classic BlueStore OSD and a ferro-osd in one cluster; a pool on each (CRUSH rules by device class); the
/// python3-rados op suite passes on both, and one seeded random op sequence gives identical results on both.
#[test]
fn differential_against_bluestore_in_the_same_cluster() {
    if !python_available() {
        eprintln!("skipping: python3-rados not available");
        return;
    }
    // Short heartbeat grace: the classic OSD and ferro-osd ping each other during the whole test; a side that
    // did not answer would be reported within seconds (checked in both logs at the end).
    let spec = ClusterSpec::default()
        .classic_osds(1)
        .without_mgr()
        .conf("global", "osd heartbeat grace", "6")
        .conf("global", "osd heartbeat interval", "1");
    let Some(c) = testcluster::start_or_skip(spec) else {
        return;
    };
    let fid = c.add_osd(&ferro()).unwrap();
    c.ceph(&[
        "osd",
        "crush",
        "rule",
        "create-replicated",
        "on-ferro",
        "default",
        "osd",
        "ferro",
    ])
    .unwrap();
    c.ceph(&[
        "osd",
        "crush",
        "rule",
        "create-replicated",
        "on-hdd",
        "default",
        "osd",
        "hdd",
    ])
    .unwrap();
    c.ceph(&["osd", "pool", "create", "bs", "8", "8", "replicated", "on-hdd"])
        .unwrap();
    c.ceph(&["osd", "pool", "create", "fs", "8", "8", "replicated", "on-ferro"])
        .unwrap();
    for pool in ["bs", "fs"] {
        let o = run(
            Command::new("/usr/bin/python3")
                .arg(script("rados_ops.py"))
                .arg(c.conf_path())
                .arg(pool),
            Duration::from_secs(60),
        );
        eprintln!("python3-rados on {pool}: {}", o.trim());
    }
    let seed = std::env::var("FERRO_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0xfe44);
    let o = run(
        Command::new("/usr/bin/python3")
            .arg(script("diff_ops.py"))
            .arg(c.conf_path())
            .args([
                "bs",
                "fs",
                &seed.to_string(),
                &std::env::var("FERRO_DIFF_OPS").unwrap_or_else(|_| "400".into()),
            ]),
        Duration::from_secs(90),
    );
    eprintln!("{}", o.trim());
    // Heartbeats both ways between a classic OSD and ferro-osd: nobody missed a reply.
    let classic = c
        .daemons()
        .into_iter()
        .map(|(n, _)| n)
        .find(|n| n.starts_with("osd.") && *n != format!("osd.{fid}"))
        .unwrap();
    let clog = std::fs::read_to_string(c.log_path(&classic)).unwrap_or_default();
    assert!(
        !clog.contains("heartbeat_check: no reply from"),
        "{classic} missed ferro-osd's heartbeat replies"
    );
    assert!(!clog.is_empty(), "no log for {classic}");
    let flog = std::fs::read_to_string(c.log_path(&format!("osd.{fid}"))).unwrap_or_default();
    assert!(
        !flog.contains("reporting failure"),
        "ferro-osd reported a live classic OSD:\n{flog}"
    );
}

/// Heartbeats: two ferro-osds ping each other on both heartbeat networks; when one is stopped (SIGSTOP), the
/// other reports it (MOSDFailure) once it has been silent for the grace and the monitors mark it down — long
/// before the 900 s beacon timeout would. Grace and interval are shortened to bound the test.
#[test]
fn stopped_peer_is_reported_and_marked_down() {
    let spec = ClusterSpec::default()
        .without_mgr()
        .conf("global", "osd heartbeat grace", "6")
        .conf("global", "osd heartbeat interval", "1")
        .conf("mon", "mon osd min down reporters", "1")
        .conf("mon", "mon osd adjust heartbeat grace", "false");
    let Some(c) = testcluster::start_or_skip(spec) else {
        return;
    };
    let a = c.add_osd(&ferro()).unwrap();
    let b = c.add_osd(&ferro()).unwrap();
    let is_up = |id: u32| -> bool {
        let d = c.ceph_json(&["osd", "dump"]).unwrap();
        d["osds"]
            .as_array()
            .and_then(|v| v.iter().find(|o| o["osd"] == id))
            .is_some_and(|o| o["up"] == 1)
    };
    assert!(is_up(a) && is_up(b));
    // Let a few ping rounds pass with both alive: no failure may be reported for a live peer.
    std::thread::sleep(Duration::from_secs(8));
    assert!(is_up(a) && is_up(b), "a live peer was marked down");
    let pid = c
        .daemons()
        .into_iter()
        .find(|(n, _)| *n == format!("osd.{b}"))
        .map(|(_, p)| p)
        .unwrap();
    let sig = |s: &str| {
        let ok = Command::new("kill")
            .args([s, &pid.to_string()])
            .status()
            .is_ok_and(|st| st.success());
        assert!(ok, "kill {s} {pid}");
    };
    sig("-STOP");
    let t0 = Instant::now();
    let down = c.wait_for("the stopped OSD marked down", Duration::from_secs(60), || {
        Ok((!is_up(b)).then_some(()))
    });
    sig("-CONT");
    down.unwrap();
    eprintln!(
        "osd.{b} marked down {:.1} s after SIGSTOP",
        t0.elapsed().as_secs_f64()
    );
    assert!(is_up(a));
    let log = std::fs::read_to_string(c.log_path(&format!("osd.{a}"))).unwrap_or_default();
    assert!(
        log.contains(&format!("reporting failure of osd.{b}")),
        "osd.{a} did not report osd.{b}:\n{log}"
    );
}

/// Replication through osd-core: three ferro-osds, a pool of size 3 / min_size 2 (CRUSH rule choosing OSDs):
/// every PG goes active+clean, rados put/get works, and every object is on all three OSDs with identical
/// contents (`ferro object-digest <pgid>` on each OSD's admin socket: names, sizes, crc32c of data, xattrs
/// and omap).
#[test]
fn three_ferro_osds_replicate_a_size_3_pool() {
    // No mgr (faster start): PG states come from the OSDs' admin sockets.
    let Some(c) = testcluster::start_or_skip(ClusterSpec::default().without_mgr()) else {
        return;
    };
    let ids: Vec<u32> = (0..3).map(|_| c.add_osd(&ferro()).unwrap()).collect();
    let pool = ferro_size3_pool(&c, "rp", 8);
    wait_replicated_clean(&c, &ids, 8, Duration::from_secs(60));
    let t = Duration::from_secs(30);
    let dir = c.dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let n = 12;
    for i in 0..n {
        let src = dir.join(format!("in{i}"));
        std::fs::write(&src, format!("replicated object {i} ").repeat(100 + i)).unwrap();
        c.rados(&["-p", "rp", "put", &format!("r{i}"), src.to_str().unwrap()], t)
            .unwrap();
        c.rados(
            &["-p", "rp", "setomapval", &format!("r{i}"), "k", &format!("v{i}")],
            t,
        )
        .unwrap();
    }
    for i in 0..n {
        let out = dir.join(format!("out{i}"));
        c.rados(&["-p", "rp", "get", &format!("r{i}"), out.to_str().unwrap()], t)
            .unwrap();
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(dir.join(format!("in{i}"))).unwrap()
        );
    }
    wait_replicated_clean(&c, &ids, 8, Duration::from_secs(30));
    let mut total = 0;
    for seed in 0..8u32 {
        let pgid = format!("{pool}.{seed:x}");
        let digests: Vec<serde_json::Value> = ids
            .iter()
            .map(|id| {
                let out = run(
                    env_cmd(&c, "ceph").args([
                        "daemon",
                        &format!("osd.{id}"),
                        "ferro",
                        "object-digest",
                        &pgid,
                    ]),
                    t,
                );
                serde_json::from_str(&out).unwrap()
            })
            .collect();
        for d in &digests[1..] {
            assert_eq!(d["objects"], digests[0]["objects"], "pg {pgid}: replicas differ");
        }
        total += digests[0]["num_objects"].as_u64().unwrap();
    }
    assert_eq!(total, n as u64, "every object on every OSD");
    // The replicas timed every replicated write from receipt to their commit reply (subop_latency).
    let subops = c.wait_for("subop_latency on the replicas", Duration::from_secs(5), || {
        let mut count = 0;
        for id in &ids {
            let o = run(
                env_cmd(&c, "ceph").args(["daemon", &format!("osd.{id}"), "perf", "dump"]),
                t,
            );
            let v: serde_json::Value = serde_json::from_str(&o).unwrap();
            count += v["osd"]["subop_latency"]["avgcount"].as_u64().unwrap_or(0);
            if v["osd"]["subop_latency"]["avgcount"].as_u64() > Some(0) {
                assert!(v["osd"]["subop_latency"]["avgtime"].as_f64() > Some(0.0), "{v}");
            }
        }
        // Two writes per object (put, setomapval), each to two replicas.
        Ok((count >= 4 * n as u64).then_some(count))
    });
    eprintln!("subop_latency avgcount over the three OSDs: {subops:?}");
    subops.unwrap();
}

/// What the cluster says about writes a client still waits for: the client's ops in flight (its objecter, through
/// its admin socket `asok`), the OSD map, each OSD's ops in flight and the end of its log. A write that never
/// completes is a liveness bug; this is what finding it takes once the cluster is gone.
fn stuck_writer_report(c: &Cluster, ids: &[u32], asok: &Path) -> String {
    let output = |args: &[&str]| {
        // `timeout`: a hung daemon must not hang the report
        match env_cmd(c, "timeout").arg("20").args(args).output() {
            Ok(o) => format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => format!("({e})"),
        }
    };
    let mut report = String::new();
    let asok = asok.display().to_string();
    // The client's ops, summed up per PG and OSD (the whole dump would crowd out the OSDs' side in CI logs).
    let objecter = output(&["ceph", "--admin-daemon", &asok, "objecter_requests"]);
    let mut waiting: BTreeMap<(String, i64), (usize, f64)> = BTreeMap::new();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&objecter) {
        for op in v["ops"].as_array().into_iter().flatten() {
            let key = (
                op["pg"].as_str().unwrap_or("?").to_owned(),
                op["osd"].as_i64().unwrap_or(-1),
            );
            let e = waiting.entry(key).or_default();
            e.0 += 1;
            e.1 = e.1.max(op["age"].as_f64().unwrap_or(0.0));
        }
        report.push_str("---- client: ops not completed (pg, osd: count, oldest age s)\n");
        for ((pg, osd), (n, age)) in &waiting {
            report.push_str(&format!("{pg} osd.{osd}: {n}, {age:.1}\n"));
        }
    } else {
        report.push_str(&format!("---- client: objecter_requests\n{objecter}\n"));
    }
    let mut show = |title: &str, args: &[&str]| {
        report.push_str(&format!("---- {title}\n{}\n", output(args).trim_end()));
    };
    // CI shows the start of a long failure output: the short summaries first, the dumps last
    for id in ids {
        let name = format!("osd.{id}");
        let status = output(&["ceph", "daemon", &name, "status"]);
        let states = serde_json::from_str::<serde_json::Value>(&status)
            .map(|v| v["pgs_by_state"].to_string())
            .unwrap_or(status);
        show(&format!("{name}: PGs by state"), &["echo", &states]);
        let log = c.log_path(&name).display().to_string();
        // what replication logged: resets, rep ops dropped or sent again
        show(
            &format!("{name}: replication lines of its log (last 15)"),
            &[
                "sh",
                "-c",
                &format!("grep -E 'rep op|reset|closed|connecting' {log} | tail -n 15"),
            ],
        );
    }
    for id in ids {
        let name = format!("osd.{id}");
        show(
            &format!("{name}: dump_ops_in_flight"),
            &["ceph", "daemon", &name, "dump_ops_in_flight"],
        );
        let log = c.log_path(&name).display().to_string();
        show(&format!("{name}: end of log"), &["tail", "-n", "20", &log]);
    }
    show("osd dump", &["ceph", "osd", "dump"]);
    report
}

/// Every OSD holds `pgs` PGs, all active, and `pgs` of them (the primaries' view) are active+clean.
fn wait_replicated_clean(c: &Cluster, ids: &[u32], pgs: u64, timeout: Duration) {
    c.wait_for(
        "every PG active+clean on its primary, active on its replicas",
        timeout,
        || {
            let mut clean = 0;
            for id in ids {
                let o = run(
                    env_cmd(c, "ceph").args(["daemon", &format!("osd.{id}"), "status"]),
                    Duration::from_secs(30),
                );
                let v: serde_json::Value = serde_json::from_str(&o).unwrap();
                if v["num_pgs"].as_u64() != Some(pgs) {
                    return Ok(None);
                }
                for (state, n) in v["pgs_by_state"].as_object().into_iter().flatten() {
                    if !state.split('+').any(|s| s == "active") {
                        return Ok(None);
                    }
                    if state == "active+clean" {
                        clean += n.as_u64().unwrap_or(0);
                    }
                }
            }
            Ok((clean >= pgs).then_some(()))
        },
    )
    .unwrap();
}

/// Issue 6 acceptance: under a write load on a size-3 / min_size-2 pool, kill -9 one of three ferro-osds, keep
/// writing, restart it. The monitors mark it down (heartbeat failure reports), the PGs keep serving with two
/// copies, the restarted OSD is recovered: every PG active+clean again, every acknowledged write reads back
/// intact, and the three copies of every PG are identical.
#[test]
fn replica_killed_under_load_recovers_and_replicas_agree() {
    if !python_available() {
        eprintln!("skipping: python3-rados not available");
        return;
    }
    let spec = ClusterSpec::default()
        .without_mgr()
        .conf("global", "osd heartbeat grace", "6")
        .conf("global", "osd heartbeat interval", "1")
        .conf("mon", "mon osd min down reporters", "1")
        .conf("mon", "mon osd adjust heartbeat grace", "false");
    let f = ferro();
    let Some((c, ids, pool)) = three_osds_size3(spec, &f, "kp") else {
        return;
    };
    let mut writer = AckedWriter::start(&c, "kp", 16);
    std::thread::sleep(Duration::from_secs(3));
    let victim = ids[2];
    let before = up_from(&c, victim);
    assert!(c.kill_daemon(&format!("osd.{victim}")).unwrap());
    let acked_at_kill = writer.acked();
    c.wait_for("the killed OSD marked down", Duration::from_secs(30), || {
        let d = c.ceph_json(&["osd", "dump"])?;
        let up = d["osds"]
            .as_array()
            .and_then(|v| v.iter().find(|o| o["osd"] == victim))
            .is_some_and(|o| o["up"] == 1);
        Ok((!up).then_some(()))
    })
    .unwrap();
    // Writes go on with two copies meanwhile.
    std::thread::sleep(Duration::from_secs(2));
    let acked_degraded = writer.acked();
    c.restart_osd(victim, &f).unwrap();
    c.wait_for("osd restarted", Duration::from_secs(60), || {
        Ok((up_from(&c, victim) > before).then_some(()))
    })
    .unwrap();
    let total = writer.finish(&c, &ids, Duration::from_secs(60));
    eprintln!(
        "{acked_at_kill} writes acknowledged at the kill, {acked_degraded} once it was down, {total} in all"
    );
    assert!(
        acked_degraded > acked_at_kill,
        "no write was acknowledged while one replica was down"
    );
    wait_replicated_clean(&c, &ids, 8, Duration::from_secs(60));
    writer.verify(&c, "kp");
    let objects = replicas_agree(&c, &ids, pool, 8);
    assert!(
        objects as usize >= total,
        "{objects} objects for {total} acknowledged writes"
    );
}

/// Connections between OSDs break under a write load (one in 100 of the messages between them breaks its
/// connection instead and is lost with it, `ferro_osd_inject_peer_resets`): every write still completes, and
/// every acknowledged write is on all three replicas. A replica's commit reply lost with its connection is
/// something only the primary can make up for (it resends the write, the replica answers the duplicate).
#[test]
fn peer_connection_failures_stall_no_write() {
    if !python_available() {
        eprintln!("skipping: python3-rados not available");
        return;
    }
    let spec = ClusterSpec::default()
        .without_mgr()
        .conf("osd", "ferro_osd_inject_peer_resets", "100");
    let Some((c, ids, pool)) = three_osds_size3(spec, &ferro(), "rp") else {
        return;
    };
    let mut writer = AckedWriter::start(&c, "rp", 10);
    let total = writer.finish(&c, &ids, Duration::from_secs(60));
    let logged = |f: &dyn Fn(&str) -> bool| -> usize {
        ids.iter()
            .map(|id| {
                let log = std::fs::read_to_string(c.log_path(&format!("osd.{id}"))).unwrap_or_default();
                log.lines().filter(|l| f(l)).count()
            })
            .sum()
    };
    let resets = logged(&|l| l.contains("connection to osd.") && l.contains(" reset ("));
    // rep ops the primary had to send again on a timeout: a loss that no reset made up for
    let overdue = logged(&|l| l.contains(" rep op ") && l.contains(" sent again"));
    eprintln!(
        "{total} writes acknowledged, {resets} peer connections broken, {overdue} rep ops sent again when overdue"
    );
    assert!(resets > 0, "no peer connection was broken");
    assert!(total > 0, "no write was acknowledged");
    wait_replicated_clean(&c, &ids, 8, Duration::from_secs(90));
    writer.verify(&c, "rp");
    let objects = replicas_agree(&c, &ids, pool, 8);
    assert!(
        objects as usize >= total,
        "{objects} objects for {total} acknowledged writes"
    );
}

/// A cluster of `spec` with three ferro-osds of `f` and a size-3 pool `pool` of 8 PGs, every PG active+clean;
/// None if Ceph is not installed.
fn three_osds_size3(spec: ClusterSpec, f: &FerroOsd, pool: &str) -> Option<(Cluster, Vec<u32>, i64)> {
    let c = testcluster::start_or_skip(spec)?;
    let ids: Vec<u32> = (0..3).map(|_| c.add_osd(f).unwrap()).collect();
    let id = ferro_size3_pool(&c, pool, 8);
    wait_replicated_clean(&c, &ids, 8, Duration::from_secs(90));
    Some((c, ids, id))
}

/// `acked_writer.py` writing for a while, with an admin socket so that a write it never sees completed can be
/// traced ([`stuck_writer_report`]).
struct AckedWriter {
    child: std::process::Child,
    acks: std::path::PathBuf,
    asok: std::path::PathBuf,
}

impl AckedWriter {
    fn start(c: &Cluster, pool: &str, seconds: u32) -> Self {
        let acks = c.dir().join(format!("acks-{pool}"));
        let asok = c.dir().join(format!("writer-{pool}.asok"));
        let child = Command::new("/usr/bin/python3")
            .arg(script("acked_writer.py"))
            .arg(c.conf_path())
            .arg(pool)
            .arg(seconds.to_string())
            .env("FERRO_WRITER_CONF", format!("admin_socket={}", asok.display()))
            .stdout(std::fs::File::create(&acks).unwrap())
            .spawn()
            .unwrap();
        AckedWriter { child, acks, asok }
    }

    /// Writes acknowledged so far.
    fn acked(&self) -> usize {
        std::fs::read_to_string(&self.acks).unwrap().lines().count()
    }

    /// Waits until the writer's time is up and its last writes completed (at most `grace` after the call, then
    /// fails with what the client and the OSDs say); returns the writes acknowledged.
    fn finish(&mut self, c: &Cluster, ids: &[u32], grace: Duration) -> usize {
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if start.elapsed() > grace {
                let report = stuck_writer_report(c, ids, &self.asok);
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("writer did not finish\n{report}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.acked()
    }

    /// Every acknowledged write reads back intact.
    fn verify(&self, c: &Cluster, pool: &str) {
        verify_acks(c, pool, &self.acks, Duration::from_secs(60));
    }
}

/// The copies of every PG of `pool` (`pgs` of them) are identical on every OSD of `ids`; returns the objects.
fn replicas_agree(c: &Cluster, ids: &[u32], pool: i64, pgs: u32) -> u64 {
    let mut objects = 0;
    for seed in 0..pgs {
        let pgid = format!("{pool}.{seed:x}");
        let digests: Vec<serde_json::Value> = ids
            .iter()
            .map(|id| {
                let out = run(
                    env_cmd(c, "ceph").args([
                        "daemon",
                        &format!("osd.{id}"),
                        "ferro",
                        "object-digest",
                        &pgid,
                    ]),
                    Duration::from_secs(30),
                );
                serde_json::from_str(&out).unwrap()
            })
            .collect();
        for (d, id) in digests.iter().zip(ids).skip(1) {
            assert_eq!(
                d["objects"], digests[0]["objects"],
                "pg {pgid}: osd.{id} differs from osd.{}",
                ids[0]
            );
        }
        objects += digests[0]["num_objects"].as_u64().unwrap();
    }
    objects
}
