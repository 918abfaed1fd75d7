// SPDX-License-Identifier: LGPL-3.0-or-later
//! Keeps IO out of the sans-IO parts: the MonClient core and its helpers, and the message codecs, must not
//! touch sockets, threads, files or clocks (time comes in as an argument). Only `blocking.rs` and
//! `cephx_auth.rs` (the driver and its wall-clock ticket checks) may.

const SANS_IO: &[&str] = &[
    "src/core.rs",
    "src/monmap_lite.rs",
    "src/epoch_map.rs",
    "src/rng.rs",
    "src/osdmap_impl.rs",
    "../ceph-msgs/src/lib.rs",
    "../ceph-msgs/src/mon.rs",
    "../ceph-msgs/src/mgr.rs",
    "../ceph-msgs/src/osdmap.rs",
];

/// Address *values* (`SocketAddr`, `IpAddr`) are fine; sockets and name resolution are not.
const BANNED: &[&str] = &[
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "ToSocketAddrs",
    "std::thread",
    "std::fs",
    "std::process",
    "Instant::now",
    "SystemTime",
    "std::io::Read",
    "std::io::Write",
    "println!",
    "eprintln!",
];

#[test]
fn sans_io_files_make_no_syscalls() {
    let root = env!("CARGO_MANIFEST_DIR");
    for f in SANS_IO {
        let text = std::fs::read_to_string(format!("{root}/{f}")).unwrap_or_else(|e| panic!("{f}: {e}"));
        // Only the code before the unit tests counts (tests may use the clock).
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for b in BANNED {
            assert!(
                !code.contains(b),
                "{f} uses {b}: IO belongs in the driver (blocking.rs)"
            );
        }
    }
}
