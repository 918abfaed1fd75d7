// SPDX-License-Identifier: LGPL-3.0-or-later
//! End to end: a real Ceph 16.2 mon + mgr (crate testcluster) and ferro-osd OSDs, driven by unmodified Ceph
//! clients (`rados`, `ceph`). Skips when Ceph is not installed (unless FERRO_REQUIRE_CLUSTER is set).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use testcluster::{ClusterSpec, FerroOsd};

fn ferro() -> FerroOsd {
    let mut f = FerroOsd::new(env!("CARGO_BIN_EXE_ferro-osd"));
    f.device_size_bytes = 1 << 30;
    f
}

#[test]
fn rados_put_get_on_a_ferro_osd() {
    let Some(c) = testcluster::start_or_skip(ClusterSpec::default()) else {
        return;
    };
    let id = c.add_osd(&ferro()).unwrap();
    eprintln!("osd.{id} up");
    c.create_pool("fp", 8).unwrap();
    let t = Duration::from_secs(30);
    let dir = c.dir().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("in");
    std::fs::write(&src, b"hello ferro\n").unwrap();
    c.rados(&["-p", "fp", "put", "obj1", &src.to_string_lossy()], t)
        .unwrap();
    let out = dir.join("out");
    c.rados(&["-p", "fp", "get", "obj1", &out.to_string_lossy()], t)
        .unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"hello ferro\n");
}
