// SPDX-License-Identifier: LGPL-3.0-or-later
//! Quick mode end to end against a real cluster (runs when Ceph is installed or FERRO_REQUIRE_CLUSTER is
//! set): the JSON must hold every test of the matrix with sane fields. It checks that the tool works, never
//! how fast anything is.
//!
//! To stay within the per-test time budget it runs the BlueStore side only, and asks for a ferro-osd binary
//! that does not exist, which also exercises the "ferro side skipped, with the reason" path. It runs the raw
//! reference too (1 s per fio test), and two rounds of the matrix (the medians' path).

use std::time::{Duration, Instant};

use bench_compare::{BlueStoreProfile, GroupSpec, MATRIX, OsdKind, RunOptions, run};

#[test]
fn quick_mode_reports_every_test() {
    if !testcluster::ceph_or_skip() {
        return;
    }
    if testcluster::which("fio").is_none() {
        assert!(
            std::env::var_os(testcluster::REQUIRE_ENV).is_none(),
            "FERRO_REQUIRE_CLUSTER is set but fio is not installed"
        );
        eprintln!("skipping: fio not installed");
        return;
    }
    let python_rados = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import rados"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !python_rados {
        assert!(
            std::env::var_os(testcluster::REQUIRE_ENV).is_none(),
            "FERRO_REQUIRE_CLUSTER is set but python3-rados is not installed"
        );
        eprintln!("skipping: python3-rados not installed (the OMAP tests need it)");
        return;
    }
    let t0 = Instant::now();
    let opts = RunOptions {
        groups: vec![
            GroupSpec {
                label: "bluestore".into(),
                kind: OsdKind::Classic,
                unavailable: None,
            },
            GroupSpec {
                label: "ferro".into(),
                kind: OsdKind::Ferro {
                    binary: "/nonexistent/ferro-osd".into(),
                    shards: 1,
                    conf: Vec::new(),
                },
                unavailable: None,
            },
        ],
        osds_per_group: 1,
        pool_size: 1,
        device_size_bytes: 2 << 30,
        // The zero-filled device files of a real run (the wrapped launcher's path), at 2 GiB per OSD.
        zero_fill_devices: true,
        pg_num: 8,
        objects: 4,
        omap_keys: 32,
        runtime_s: 1,
        // Two rounds: the medians and the per-round rows go through the real runner too.
        rounds: 2,
        // The classic OSDs' SSD profile: the option reaches ceph-osd's mkfs and the OSDs still boot.
        bluestore_profile: BlueStoreProfile::Ssd,
        tests: MATRIX.to_vec(),
        quick: true,
        raw: true,
        workspace: concat!(env!("CARGO_MANIFEST_DIR"), "/../..").into(),
    };
    let report = run(&opts).expect("quick run");
    let j = report.to_json();
    eprintln!("{}", bench_compare::markdown_table(&report));

    assert_eq!(j["groups"][0]["status"], "ran");
    assert_eq!(j["groups"][1]["status"], "skipped");
    assert!(
        j["groups"][1]["skip_reason"]
            .as_str()
            .is_some_and(|r| r.contains("/nonexistent/ferro-osd")),
        "{}",
        j["groups"][1]
    );
    assert_eq!(j["meta"]["rounds"], 2);
    assert_eq!(j["meta"]["bluestore_profile"], "ssd");
    assert!(j["meta"]["disk_rotational"].is_boolean() || j["meta"]["disk_rotational"].is_null());
    assert!(j["meta"]["commit"].as_str().is_some_and(|c| !c.is_empty()));
    assert!(j["meta"]["date_utc"].as_str().is_some_and(|d| d.ends_with("UTC")));
    let tests = j["tests"].as_array().expect("tests");
    let ids: Vec<&str> = tests.iter().filter_map(|t| t["id"].as_str()).collect();
    let want: Vec<&str> = MATRIX.iter().map(|t| t.id).collect();
    assert_eq!(ids, want);
    for t in tests {
        let r = &t["results"]["bluestore"];
        let num = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{} {k}: {r}", t["id"]));
        assert!(r["ops"].as_u64().is_some_and(|n| n > 0), "{}: {r}", t["id"]);
        assert!(num("iops") > 0.0 && num("mb_per_s") > 0.0);
        assert!(
            num("lat_p50_us") > 0.0 && num("lat_p99_us") >= num("lat_p50_us"),
            "{}: {r}",
            t["id"]
        );
        assert!(num("osd_cpu_us_per_op") >= 0.0);
        // A classic OSD's RSS is tens of MiB at least.
        assert!(num("osd_rss_bytes") > 10e6, "{}: {r}", t["id"]);
        // Both rounds are kept; the reported IOPS is their median (the mean of two).
        let rounds = r["rounds"]
            .as_array()
            .unwrap_or_else(|| panic!("{} rounds: {r}", t["id"]));
        assert_eq!(rounds.len(), 2, "{}: {r}", t["id"]);
        let iops: Vec<f64> = rounds.iter().filter_map(|x| x["iops"].as_f64()).collect();
        assert_eq!(iops.len(), 2, "{}: {r}", t["id"]);
        assert!(
            ((iops[0] + iops[1]) / 2.0 - num("iops")).abs() <= 1e-6 * num("iops"),
            "{}: {r}",
            t["id"]
        );
        // The skipped side has no numbers, only the reason.
        assert!(t["results"]["ferro"].get("iops").is_none());
        assert!(t["results"]["ferro"]["error"].is_string());
        assert!(t["ratio"].is_null());
    }
    // The raw reference: a row for every fio test, "not applicable" (never a zero) for OMAP.
    assert_eq!(j["meta"]["raw"]["engine"], "io_uring");
    for t in tests {
        let raw = &t["raw"];
        if t["id"].as_str().is_some_and(|id| id.starts_with("omap")) {
            assert!(raw["not_applicable"].is_string(), "{}: {raw}", t["id"]);
            assert!(raw.get("iops").is_none());
            continue;
        }
        let num = |k: &str| {
            raw[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{} raw {k}: {raw}", t["id"]))
        };
        assert!(num("iops") > 0.0 && num("mb_per_s") > 0.0, "{}: {raw}", t["id"]);
        assert!(num("lat_p99_us") >= num("lat_p50_us") && num("lat_p50_us") > 0.0);
        assert!(num("fio_cpu_us_per_op") > 0.0, "{}: {raw}", t["id"]);
        assert_eq!(raw["jobs"], 1);
        assert!(t["of_raw"]["bluestore"]["iops"].as_f64().is_some_and(|x| x > 0.0));
    }
    let svg = bench_compare::svg_chart(&report);
    assert!(svg.contains("ferro (skipped)"));
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "quick mode took {:?}",
        t0.elapsed()
    );
}
