// SPDX-License-Identifier: LGPL-3.0-or-later
//! Our monitor-side cephx (`MonAuthServer` behind `CephxMonServerAuth`, over our msgr2) against the real Ceph
//! 16.2 `ceph` CLI: the real client opens our AUTH_DONE (session key, tickets, connection secret), signs, and its
//! first messages arrive through the secure (or crc) session. Skipped when `ceph`/`ceph-authtool` are missing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cephx::msgr2_auth::CephxMonServerAuth;
use cephx::service::{AuthEntry, MonAuthServer};
use cephx::*;
use msgr2::auth::{CON_MODE_CRC, CON_MODE_SECURE};
use msgr2::{AddrVec, Config, Connection, EntityAddr, Event};

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn now_utime() -> UTime {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    UTime::new(d.as_secs() as u32, d.subsec_nanos())
}

/// Returns (our acceptor ready, the chosen mode, message types received, authenticated name).
fn serve_one(mode_arg: &str) -> Option<(bool, u32, Vec<u16>, String)> {
    if !have("ceph") || !have("ceph-authtool") {
        if std::env::var_os("FERRO_REQUIRE_CLUSTER").is_some() {
            panic!("FERRO_REQUIRE_CLUSTER is set but the ceph CLI is not installed");
        }
        eprintln!("skipping: ceph CLI or ceph-authtool not installed");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("cephx-real-client-{}-{mode_arg}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keyring = dir.join("keyring");
    assert!(
        Command::new("ceph-authtool")
            .args([
                "--create-keyring",
                keyring.to_str().unwrap(),
                "--gen-key",
                "-n",
                "client.admin",
                "--cap",
                "mon",
                "allow *"
            ])
            .output()
            .unwrap()
            .status
            .success()
    );
    let kr = ceph_config::Keyring::parse(&std::fs::read_to_string(&keyring).unwrap(), "k").unwrap();
    let key = CryptoKey::from_base64(kr.key_of("client.admin").unwrap()).unwrap();

    let now = now_utime();
    let mut mon = MonAuthServer::new(Arc::new(AwsLcProvider));
    mon.entities.insert(
        parse_entity_name("client.admin").unwrap(),
        AuthEntry {
            key,
            caps: [("mon".to_string(), "allow *".to_string())].into(),
        },
    );
    for s in [ENTITY_TYPE_MON, ENTITY_TYPE_OSD, ENTITY_TYPE_MGR] {
        mon.add_rotating(s, now);
    }
    let mon = Arc::new(Mutex::new(mon));

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let mut child = Command::new("ceph")
        .args([
            "-c",
            "/dev/null",
            "-m",
            &format!("v2:127.0.0.1:{port}"),
            "-n",
            "client.admin",
            "-k",
            keyring.to_str().unwrap(),
            "--connect-timeout",
            "15",
            "--ms_mon_client_mode",
            mode_arg,
            "status",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(std::env::temp_dir().join(format!("cephx-cli-{mode_arg}.log"))).unwrap(),
        )
        .spawn()
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut stream = loop {
        match listener.accept() {
            Ok((s, _)) => break Some(s),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    }
    .expect("the ceph CLI connected");
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let auth = CephxMonServerAuth::new(mon.clone(), now);
    let mut cfg = Config::new(msgr2::types::ENTITY_TYPE_MON, 0);
    cfg.my_addrs = AddrVec::one(EntityAddr::msgr2(format!("127.0.0.1:{port}").parse().unwrap(), 0));
    let mut conn = Connection::acceptor(cfg, Box::new(auth), Instant::now());
    // HELLO tells the client the address we see it at; the real client aborts on a blank one
    // (`entity_addr_t::set_port` in its `handle_hello`), so an acceptor is always given the socket's peer.
    conn.set_peer_socket_addr(stream.peer_addr().unwrap());
    let mut msgs = Vec::new();
    let mut buf = vec![0u8; 65536];
    while Instant::now() < deadline && msgs.is_empty() && !conn.is_closed() {
        while let Some(out) = conn.poll_output() {
            let _ = stream.write_all(&out);
        }
        while let Some(e) = conn.poll_event() {
            if let Event::Message(m) = e {
                msgs.push(m.msg_type);
            }
        }
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Err(e) = conn.handle_input(Instant::now(), &buf[..n]) {
                    eprintln!("{mode_arg}: our acceptor failed: {e:?}");
                }
            }
            Err(_) => {}
        }
    }
    let ready = conn.is_ready();
    let mode = conn.peer().map(|p| p.con_mode).unwrap_or(0);
    let name = conn.peer().map(|p| format!("{:?}", p)).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
    Some((ready, mode, msgs, name))
}

#[test]
fn real_ceph_cli_authenticates_against_our_mon_auth() {
    for (arg, mode) in [("secure", CON_MODE_SECURE), ("crc", CON_MODE_CRC)] {
        let Some((ready, got_mode, msgs, peer)) = serve_one(arg) else {
            return;
        };
        eprintln!("{arg}: ready {ready}, mode {got_mode}, messages {msgs:?}");
        assert!(
            ready,
            "{arg}: the real client did not complete the session: {peer}"
        );
        assert_eq!(got_mode, mode);
        assert!(
            !msgs.is_empty(),
            "{arg}: a message arrived through the authenticated session"
        );
    }
}
