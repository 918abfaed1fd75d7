// SPDX-License-Identifier: LGPL-3.0-or-later
//! Helpers shared by the live-cluster tests (e2e.rs, replication.rs, split.rs, map_catchup.rs).
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use testcluster::{Cluster, ClusterSpec, FerroOsd};

/// A script under tests/scripts.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scripts")
        .join(name)
}

/// Debian's python3 with the rados bindings is present.
pub fn python_available() -> bool {
    Command::new("/usr/bin/python3")
        .args(["-c", "import rados"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Run a command with a time bound; returns stdout, panics with stderr on failure. Both pipes are drained while
/// the child runs (a child writing more than a pipe's capacity would otherwise block forever).
pub fn run(cmd: &mut Command, timeout: Duration) -> String {
    use std::io::Read;
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out_t = drain(Box::new(child.stdout.take().unwrap()));
    let err_t = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} timed out after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = String::from_utf8_lossy(&out_t.join().unwrap()).to_string();
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap()).to_string();
    assert!(status.success(), "{what} failed ({status}): {stderr}\n{stdout}");
    stdout
}

/// A replicated pool of size 3 / min_size 2 with `pgs` PGs on a rule choosing OSDs of class `ferro` (one host,
/// so the failure domain is the OSD); returns its id.
pub fn ferro_size3_pool(c: &Cluster, name: &str, pgs: u32) -> i64 {
    c.ceph(&[
        "osd",
        "crush",
        "rule",
        "create-replicated",
        "r3",
        "default",
        "osd",
        "ferro",
    ])
    .unwrap();
    let pgs = pgs.to_string();
    c.ceph(&["osd", "pool", "create", name, &pgs, &pgs, "replicated", "r3"])
        .unwrap();
    c.ceph(&["osd", "pool", "set", name, "size", "3"]).unwrap();
    c.ceph(&["osd", "pool", "set", name, "min_size", "2"]).unwrap();
    c.ceph(&["osd", "pool", "application", "enable", name, "rados"])
        .unwrap();
    c.pool_id(name).unwrap()
}

/// Waits until `ceph pg stat` counts every PG active+clean (and at least one PG).
pub fn wait_active_clean(c: &Cluster, timeout: Duration) {
    c.wait_for("all PGs active+clean", timeout, || {
        let s = c.ceph_json(&["pg", "stat"])?;
        let num = s["pg_summary"]["num_pgs"].as_u64().unwrap_or(0);
        let clean: u64 = s["pg_summary"]["num_pg_by_state"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter(|x| x["name"] == "active+clean")
                    .filter_map(|x| x["num"].as_u64())
                    .sum()
            })
            .unwrap_or(0);
        Ok((num > 0 && clean == num).then_some(()))
    })
    .unwrap();
}

/// A ferro-osd of this build with two shards (cores) and a 1 GiB device.
pub fn ferro_two_shards() -> FerroOsd {
    let mut f = FerroOsd::new(env!("CARGO_BIN_EXE_ferro-osd"));
    f.device_size_bytes = 1 << 30;
    f.shards = 2;
    f
}

/// A cluster with a mgr (PG stats every second, no PG autoscaling, a 6 s heartbeat grace and one reporter
/// enough to mark an OSD down), three OSDs started with `f`, and a size-3 pool `pool` of `pgs` PGs on them,
/// active+clean. Returns the cluster and the OSD ids; `None` (the test skips) without Ceph or python3-rados.
pub fn three_osds_and_pool(f: &FerroOsd, pool: &str, pgs: u32) -> Option<(Cluster, Vec<u32>)> {
    if !python_available() {
        eprintln!("skipping: python3-rados not available");
        return None;
    }
    let spec = ClusterSpec::default()
        .conf("mgr", "mgr stats period", "1")
        .conf("global", "osd heartbeat grace", "6")
        .conf("global", "osd heartbeat interval", "1")
        .conf("global", "osd pool default pg autoscale mode", "off")
        .conf("mon", "mon osd min down reporters", "1");
    let c = testcluster::start_or_skip(spec)?;
    let ids: Vec<u32> = (0..3).map(|_| c.add_osd(f).unwrap()).collect();
    ferro_size3_pool(&c, pool, pgs);
    wait_active_clean(&c, Duration::from_secs(120));
    Some((c, ids))
}

/// tests/scripts/split_objects.py: `mode` "write" or "verify" objects `split-0` .. `split-{n-1}` of `pool`;
/// returns its output.
pub fn split_objects(c: &Cluster, pool: &str, mode: &str, n: u32, timeout: Duration) -> String {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(script("split_objects.py"))
        .arg(c.conf_path())
        .args([pool, mode, &n.to_string()]);
    run(&mut cmd, timeout)
}

/// Reads back every write `acked_writer.py` listed as acknowledged in `acks` (python3-rados, through the
/// primaries); panics on any mismatch. Returns the script's verdict line.
pub fn verify_acks(c: &Cluster, pool: &str, acks: &std::path::Path, timeout: Duration) -> String {
    let o = run(
        Command::new("/usr/bin/python3")
            .arg(script("acked_writer.py"))
            .arg(c.conf_path())
            .arg(pool)
            .arg("--verify")
            .arg(acks),
        timeout,
    );
    let o = o.trim().to_string();
    eprintln!("{o}");
    assert!(o.contains(", 0 bad"), "{o}");
    o
}
