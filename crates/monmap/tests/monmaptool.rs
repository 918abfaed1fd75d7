// SPDX-License-Identifier: LGPL-3.0-or-later
//! Maps made by the real `monmaptool` decode to what `monmaptool --print` shows, and re-encode byte-identically.
//! Skips when monmaptool is absent, unless FERRO_REQUIRE_CLUSTER is set.

#![allow(clippy::unwrap_used)] // test helpers
use std::path::PathBuf;
use std::process::Command;

use denc::{Decode, Encode};
use monmap::MonMap;

fn tool_available() -> bool {
    let ok = Command::new("monmaptool").arg("--help").output().is_ok();
    if !ok {
        assert!(
            std::env::var_os("FERRO_REQUIRE_CLUSTER").is_none(),
            "monmaptool not found but FERRO_REQUIRE_CLUSTER is set"
        );
        eprintln!("skipping: monmaptool not found");
    }
    ok
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferro-monmap-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("monmap")
}

fn run(args: &[&str]) -> String {
    let out = Command::new("monmaptool").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "monmaptool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Strip monmaptool's own chatter, keeping the map's lines.
fn printed(path: &str) -> String {
    run(&["--print", path])
        .lines()
        .filter(|l| !l.starts_with("monmaptool:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn created_maps_match_print() {
    if !tool_available() {
        return;
    }
    let fsid = "3f1d4c2e-5b6a-4e8f-9a0b-1c2d3e4f5a6b";
    let cases: Vec<Vec<&str>> = vec![
        vec!["--addv", "a", "[v2:127.0.0.1:3300,v1:127.0.0.1:6789]"],
        vec![
            "--addv",
            "a",
            "[v2:127.0.0.1:3300,v1:127.0.0.1:6789]",
            "--addv",
            "b",
            "[v2:10.1.2.3:3300,v1:10.1.2.3:6789]",
            "--add",
            "c",
            "127.0.0.3:6789",
            "--add",
            "d",
            "[::1]:3300",
            "--set-min-mon-release",
            "16",
            "--enable-all-features",
        ],
    ];
    for (i, extra) in cases.iter().enumerate() {
        let path = scratch(&format!("case{i}"));
        let p = path.to_str().unwrap();
        let mut args = vec!["--create", "--clobber", "--fsid", fsid];
        args.extend(extra.iter().copied());
        args.push(p);
        run(&args);
        let bytes = std::fs::read(&path).unwrap();
        let m = MonMap::decode_all(bytes.clone()).unwrap();
        assert_eq!(m.fsid.to_string(), fsid);
        assert_eq!(
            m.to_bytes(denc::CEPH_FEATURES_ALL),
            bytes,
            "case {i}: re-encoding differs"
        );
        let theirs = printed(p);
        let ours = m.print();
        // Times print in local time; compare them only where local time is UTC.
        let keep = |s: &str| -> Vec<String> {
            s.lines()
                .filter(|l| {
                    !(l.starts_with("last_changed") || l.starts_with("created")) || l.ends_with("+0000")
                })
                .map(String::from)
                .collect()
        };
        assert_eq!(
            keep(&ours),
            keep(&theirs),
            "case {i}\nours:\n{ours}\ntheirs:\n{theirs}"
        );
        assert!(m.ranks.len() == extra.iter().filter(|a| a.starts_with("--add")).count());
        if let Some(d) = path.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
