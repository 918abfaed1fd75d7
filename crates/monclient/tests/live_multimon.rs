// SPDX-License-Identifier: LGPL-3.0-or-later
#![allow(clippy::unwrap_used, clippy::expect_used)] // test harness
//! Hunting over a real three-monitor quorum (Ceph 16.2, cephx, msgr2 only; no mgr or OSDs): the client knows
//! one address from its configuration, learns the other two from the monmap, and when the monitor it talks to
//! is killed it re-hunts to a survivor, resends its pending command and resumes its osdmap subscription.
//! Skipped when Ceph is not installed.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cephx::msgr2_auth::WANT_MON_OSD_MGR;
use monclient::blocking::{BlockingMonClient, DriverConfig};
use monclient::{Config, Event, MonTarget};
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};

const IDS: [&str; 3] = ["a", "b", "c"];

/// Three monitors in a temporary directory; killed and removed on drop.
struct Quorum {
    dir: PathBuf,
    addrs: Vec<SocketAddr>,
    mons: Vec<Option<Child>>,
}

impl Drop for Quorum {
    fn drop(&mut self) {
        for c in self.mons.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::env::var_os("FERRO_KEEP_CLUSTER").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Quorum {
    fn conf(&self) -> PathBuf {
        self.dir.join("ceph.conf")
    }

    fn start() -> Quorum {
        let dir = std::env::temp_dir().join(format!("ferro-multimon.{}.{}", std::process::id(), free_port()));
        std::fs::create_dir_all(dir.join("log")).unwrap();
        std::fs::create_dir_all(dir.join("run")).unwrap();
        let fsid = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
            .unwrap()
            .trim()
            .to_string();
        // Hold every listener until all ports are chosen: a port freed at once can be handed out again, and two
        // monitors on one address make monmaptool refuse the map.
        let held: Vec<TcpListener> = IDS
            .iter()
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap())
            .collect();
        let addrs: Vec<SocketAddr> = held.iter().map(|l| l.local_addr().unwrap()).collect();
        drop(held);
        let mut q = Quorum {
            dir: dir.clone(),
            addrs: addrs.clone(),
            mons: Vec::new(),
        };
        let d = dir.display();
        let host: Vec<String> = addrs.iter().map(|a| format!("[v2:{a}]")).collect();
        let conf = format!(
            "[global]\n\tfsid = {fsid}\n\tmon host = {}\n\tauth cluster required = cephx\n\tauth service required = cephx\n\
             \tauth client required = cephx\n\tauth allow insecure global id reclaim = false\n\tms bind msgr1 = false\n\
             \tms bind msgr2 = true\n\tms bind ipv6 = false\n\tpublic addr = 127.0.0.1\n\trun dir = {d}/run\n\
             \tadmin socket = {d}/run/$cluster-$name.asok\n\tlog file = {d}/log/$name.log\n\
             \tmon cluster log file = {d}/log/cluster.log\n\tmon data = {d}/$name\n\tmon data avail warn = 2\n\
             \tmon data avail crit = 1\n\tmon allow pool delete = true\n\tosd pool default pg autoscale mode = off\n\
             [client]\n\tkeyring = {d}/admin.keyring\n",
            host.join(" ")
        );
        std::fs::write(q.conf(), conf).unwrap();
        let p = |name: &str| dir.join(name).display().to_string();
        run(Command::new("ceph-authtool")
            .args([&p("mon.keyring"), "--create-keyring", "--gen-key", "-n", "mon."])
            .args(["--cap", "mon", "allow *"]));
        run(Command::new("ceph-authtool")
            .args([
                &p("admin.keyring"),
                "--create-keyring",
                "--gen-key",
                "-n",
                "client.admin",
            ])
            .args([
                "--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *",
            ]));
        run(Command::new("ceph-authtool").args([&p("mon.keyring"), "--import-keyring", &p("admin.keyring")]));
        let mut mm = Command::new("monmaptool");
        mm.args(["--create", "--fsid", &fsid]);
        for (id, a) in IDS.iter().zip(&addrs) {
            mm.args(["--addv", id, &format!("[v2:{a}]")]);
        }
        run(mm.arg(p("monmap")));
        for id in IDS {
            run(Command::new("ceph-mon")
                .arg("-c")
                .arg(q.conf())
                .args(["--mkfs", "-i", id, "--monmap", &p("monmap")])
                .args(["--keyring", &p("mon.keyring")]));
        }
        for id in IDS {
            let child = Command::new("ceph-mon")
                .arg("-c")
                .arg(q.conf())
                .args(["-f", "-i", id])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            q.mons.push(Some(child));
        }
        q.wait_quorum(3, Duration::from_secs(40));
        q
    }

    fn wait_quorum(&self, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let out = Command::new("ceph")
                .arg("-c")
                .arg(self.conf())
                .args(["--connect-timeout", "3", "quorum_status", "-f", "json"])
                .output()
                .unwrap();
            if out.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                if v["quorum_names"].as_array().is_some_and(|q| q.len() == n) {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no quorum of {n} within {timeout:?} (logs in {})",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn kill(&mut self, addr: SocketAddr) {
        let i = self.addrs.iter().position(|a| *a == addr).unwrap();
        let mut c = self.mons[i].take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

fn admin_key(dir: &Path) -> cephx::CryptoKey {
    let text = std::fs::read_to_string(dir.join("admin.keyring")).unwrap();
    let k = ceph_config::Keyring::parse(&text, "admin.keyring").unwrap();
    cephx::CryptoKey::from_base64(k.key_of("client.admin").unwrap()).unwrap()
}

#[test]
fn hunts_over_the_monmap_and_fails_over_when_its_monitor_dies() {
    if !testcluster::ceph_installed() {
        eprintln!("skipping: Ceph not installed");
        return;
    }
    let t0 = Instant::now();
    let mut q = Quorum::start();
    let key = admin_key(&q.dir);
    let auth = monclient::blocking::cephx_auth(
        cephx::EntityName::new(msgr2::types::ENTITY_TYPE_CLIENT, "admin"),
        key,
        WANT_MON_OSD_MGR,
        vec![CON_MODE_SECURE, CON_MODE_CRC],
    );
    let driver = DriverConfig {
        msgr: msgr2::connection::Config::new(msgr2::types::ENTITY_TYPE_CLIENT, -1),
        connect_timeout: Duration::from_secs(2),
    };
    let cfg = Config {
        ping_interval: Duration::from_millis(500),
        ping_timeout: Duration::from_secs(3),
        hunt_interval: Duration::from_secs(2),
        ..Config::default()
    };
    // The configuration names only the first monitor.
    let seed_mon = vec![MonTarget {
        name: "conf".into(),
        addr: q.addrs[0],
    }];
    let t = Duration::from_secs(30);
    let mut c = BlockingMonClient::<osdmap::OsdMap>::new(cfg, seed_mon, 11, driver, auth).unwrap();
    c.wait_connected(t).unwrap();
    let e0 = c.wait_osdmap(0, t).unwrap().epoch;
    c.run_until(t, "the monmap", |c| c.core().monmap().is_some())
        .unwrap();
    // In rank order, which Ceph derives from the addresses (random ports here): compare as a set.
    let mut names: Vec<&str> = c.core().mons().iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, IDS, "the hunt list is the monmap's monitors");
    let first = c.core().current_mon().unwrap().clone();
    assert_eq!((first.name.as_str(), first.addr), ("a", q.addrs[0]));
    while c.poll_event().is_some() {}

    // Kill the monitor we talk to; a command issued now must complete through a survivor.
    q.kill(first.addr);
    let killed = Instant::now();
    let r = c
        .mon_command(
            vec![r#"{"prefix": "osd pool create", "pool": "failover", "pg_num": 1}"#.into()],
            Bytes::new(),
            t,
        )
        .unwrap();
    assert_eq!(r.rc, 0, "{}", r.outs);
    let failover = killed.elapsed();
    let now = c.core().current_mon().unwrap().clone();
    assert_ne!(now.addr, first.addr);
    assert!(["b", "c"].contains(&now.name.as_str()));
    let mut lost = false;
    let mut regained = false;
    while let Some(e) = c.poll_event() {
        lost |= matches!(&e, Event::SessionLost { target } if target.addr == first.addr);
        regained |= lost && matches!(e, Event::SessionEstablished { .. });
    }
    assert!(lost && regained);
    // The osdmap subscription resumed on the new monitor: the pool's epoch arrives as an incremental.
    let (newest, _) = c.get_version("osdmap", t).unwrap();
    let m = c.wait_osdmap(newest as u32, t).unwrap();
    assert!(m.epoch > e0 && m.pool_by_name("failover").is_some());
    eprintln!(
        "3-mon quorum: failover from mon.a to mon.{} with a command in flight took {:.1} s (test {:.1} s)",
        now.name,
        failover.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}
