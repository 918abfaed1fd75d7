// SPDX-License-Identifier: LGPL-3.0-or-later
//! Shared by the tests that compare with Ceph's own tools (crushtool.rs, osdmaptool.rs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A Ceph tool on PATH; `None` (after printing why) when it is missing, unless FERRO_REQUIRE_CLUSTER demands it.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("FERRO_REQUIRE_CLUSTER").is_none(),
            "{name} not found on PATH and FERRO_REQUIRE_CLUSTER is set"
        );
        eprintln!("skipping: {name} not found on PATH (install ceph 16.2.15 to run this test)");
    }
    found
}

/// Run a tool, which must succeed; its stdout.
pub fn run(tool: &Path, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().expect("run tool");
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}{}",
        tool.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A file of crates/crush/testdata.
pub fn testdata(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
