// SPDX-License-Identifier: LGPL-3.0-or-later
//! fio job files for `ioengine=rados` and parsing of fio's JSON output.
//!
//! Object layout: fio's rados engine uses each job *file* as one RADOS object, named after the file. With
//! `nrfiles=N`, `filesize=4m` and a fixed `filename_format`, one job addresses N objects
//! `bench.0.0 .. bench.0.<N-1>` of 4 MiB each, the way RBD stripes an image over 4 MiB objects; every test
//! uses the same names, so reads hit what the prefill wrote. Random tests pick a random object per request
//! (`file_service_type=random`) and a random offset in it; sequential tests move from object to object.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;

use crate::error::{Result, bad};
use crate::report::Measurement;

/// Object size: RBD's default object size.
pub const OBJECT_SIZE_BYTES: u64 = 4 << 20;

/// One fio job against one pool.
#[derive(Debug, Clone)]
pub struct FioJob {
    /// The cluster's ceph.conf.
    pub conf: PathBuf,
    /// Pool to run against.
    pub pool: String,
    /// fio `rw=`.
    pub rw: String,
    /// Request size.
    pub bs_bytes: u64,
    /// Requests in flight.
    pub iodepth: u32,
    /// For `randrw`: percentage of reads.
    pub rwmixread: Option<u32>,
    /// Number of 4 MiB objects.
    pub objects: u32,
    /// `Some(s)`: run for `s` seconds (looping over the objects); `None`: one pass over every object.
    pub runtime_s: Option<u32>,
}

/// The job file for `job` (fio reads it from stdin or a file).
pub fn job_file(job: &FioJob) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "[global]");
    let _ = writeln!(s, "ioengine=rados");
    let _ = writeln!(s, "clientname=admin");
    let _ = writeln!(s, "conf={}", job.conf.display());
    let _ = writeln!(s, "pool={}", job.pool);
    // Objects are created by the prefill; touching them again would add writes to read tests.
    let _ = writeln!(s, "touch_objects=0");
    let _ = writeln!(s, "filename_format=bench.$jobnum.$filenum");
    let _ = writeln!(s, "nrfiles={}", job.objects);
    let _ = writeln!(s, "filesize={OBJECT_SIZE_BYTES}");
    let _ = writeln!(s, "size={}", u64::from(job.objects) * OBJECT_SIZE_BYTES);
    let _ = writeln!(s, "openfiles={}", job.objects.clamp(1, 1024));
    pattern_lines(
        &mut s,
        &job.rw,
        job.bs_bytes,
        job.iodepth,
        job.rwmixread,
        job.runtime_s,
    );
    let random = job.rw.starts_with("rand");
    let _ = writeln!(
        s,
        "file_service_type={}",
        if random { "random" } else { "roundrobin" }
    );
    let _ = writeln!(s, "[bench]");
    s
}

/// The `[global]` lines that give a job its IO pattern, shared by the rados jobs and the raw reference's so that
/// both run the same test: request size, depth, direction (and mix), random offsets drawn afresh, run time,
/// latency percentiles.
pub(crate) fn pattern_lines(
    s: &mut String,
    rw: &str,
    bs_bytes: u64,
    iodepth: u32,
    rwmixread: Option<u32>,
    runtime_s: Option<u32>,
) {
    let _ = writeln!(s, "bs={bs_bytes}");
    let _ = writeln!(s, "iodepth={iodepth}");
    let _ = writeln!(s, "rw={rw}");
    if let Some(mix) = rwmixread {
        let _ = writeln!(s, "rwmixread={mix}");
        // One set of numbers for the mixed test: latency percentiles over reads and writes together.
        let _ = writeln!(s, "unified_rw_reporting=mixed");
    }
    if rw.starts_with("rand") {
        let _ = writeln!(s, "norandommap=1");
        let _ = writeln!(s, "randrepeat=0");
    }
    if let Some(rt) = runtime_s {
        let _ = writeln!(s, "time_based=1");
        let _ = writeln!(s, "runtime={rt}");
    }
    // No ramp time: OSD CPU is sampled around the whole fio process, so every op counted must be in the
    // totals fio reports.
    let _ = writeln!(s, "lat_percentiles=1");
    let _ = writeln!(s, "percentile_list=50:99");
}

/// Parses fio's `--output-format=json` output (anything before the first `{`, such as warnings, is
/// skipped) into one measurement summed over reads and writes.
pub fn parse_fio_json(text: &str) -> Result<Measurement> {
    let jobs = fio_jobs(text)?;
    let job = jobs.first().ok_or_else(|| bad("fio", "no jobs in output"))?;
    parse_job(job)
}

/// The `jobs` array of fio's `--output-format=json` output (anything before the first `{` is skipped); never
/// empty.
pub(crate) fn fio_jobs(text: &str) -> Result<Vec<Value>> {
    let start = text
        .find('{')
        .ok_or_else(|| bad("fio", "no JSON object in output"))?;
    let mut v: Value = serde_json::from_str(&text[start..]).map_err(|e| bad("fio", e.to_string()))?;
    match v["jobs"].take() {
        Value::Array(jobs) if !jobs.is_empty() => Ok(jobs),
        _ => Err(bad("fio", "no jobs in output")),
    }
}

/// CPU time (user + system) of one fio job, µs: fio reports it as percentages of the job's run time
/// (`usr_cpu`, `sys_cpu`, `job_runtime` in ms). It is the submitting thread's own time: the syscalls that
/// submit and reap the IO, and whatever completion work the kernel charges to that thread.
pub(crate) fn job_cpu_us(job: &Value) -> Result<f64> {
    let f = |k: &str| {
        job[k]
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| bad("fio", format!("no {k} in job")))
    };
    Ok((f("usr_cpu")? + f("sys_cpu")?) / 100.0 * f("job_runtime")? * 1000.0)
}

/// One job of fio's JSON output as a measurement summed over reads and writes.
pub(crate) fn parse_job(job: &Value) -> Result<Measurement> {
    if let Some(err) = job["error"].as_i64().filter(|e| *e != 0) {
        return Err(bad("fio", format!("job error {err}")));
    }
    let mut ops = 0u64;
    let mut bytes = 0u64;
    let mut runtime_ms = 0u64;
    // Percentiles of the direction with the most operations (for the mixed test `mixed` holds both).
    let mut best: Option<(u64, f64, f64)> = None;
    // With `unified_rw_reporting=mixed` the `mixed` section holds everything; never count twice.
    let dirs: &[&str] = if job["mixed"]["total_ios"].as_u64().unwrap_or(0) > 0 {
        &["mixed"]
    } else {
        &["read", "write"]
    };
    for &dir in dirs {
        let d = &job[dir];
        let n = d["total_ios"].as_u64().unwrap_or(0);
        if n == 0 {
            continue;
        }
        ops += n;
        bytes += d["io_bytes"].as_u64().unwrap_or(0);
        runtime_ms = runtime_ms.max(d["runtime"].as_u64().unwrap_or(0));
        let pct = ["lat_ns", "clat_ns"]
            .iter()
            .find_map(|k| d[*k]["percentile"].as_object().filter(|m| !m.is_empty()))
            .ok_or_else(|| bad("fio", format!("no latency percentiles for {dir}")))?;
        let p = |want: f64| -> Option<f64> {
            pct.iter()
                .find(|(k, _)| k.parse::<f64>().is_ok_and(|x| (x - want).abs() < 1e-6))
                .and_then(|(_, v)| v.as_f64())
        };
        let (p50, p99) = p(50.0)
            .zip(p(99.0))
            .ok_or_else(|| bad("fio", format!("no p50/p99 for {dir}")))?;
        if best.is_none_or(|(bn, _, _)| n > bn) {
            best = Some((n, p50, p99));
        }
    }
    let (_, p50_ns, p99_ns) = best.ok_or_else(|| bad("fio", "no I/O completed"))?;
    if runtime_ms == 0 {
        return Err(bad("fio", "zero runtime"));
    }
    let secs = runtime_ms as f64 / 1000.0;
    Ok(Measurement {
        ops,
        runtime_s: secs,
        iops: ops as f64 / secs,
        mb_per_s: bytes as f64 / secs / 1e6,
        lat_p50_us: p50_ns / 1000.0,
        lat_p99_us: p99_ns / 1000.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> FioJob {
        FioJob {
            conf: "/c/ceph.conf".into(),
            pool: "bench-bluestore".into(),
            rw: "randrw".into(),
            bs_bytes: 4096,
            iodepth: 16,
            rwmixread: Some(70),
            objects: 256,
            runtime_s: Some(20),
        }
    }

    #[test]
    fn job_file_addresses_many_4m_objects() {
        let f = job_file(&job());
        for line in [
            "ioengine=rados",
            "pool=bench-bluestore",
            "conf=/c/ceph.conf",
            "nrfiles=256",
            "filesize=4194304",
            "size=1073741824",
            "file_service_type=random",
            "rwmixread=70",
            "unified_rw_reporting=mixed",
            "runtime=20",
            "touch_objects=0",
            "filename_format=bench.$jobnum.$filenum",
        ] {
            assert!(f.lines().any(|l| l == line), "missing {line:?} in\n{f}");
        }
        let mut seq = job();
        seq.rw = "write".into();
        seq.rwmixread = None;
        seq.runtime_s = None;
        let f = job_file(&seq);
        assert!(f.contains("file_service_type=roundrobin"));
        assert!(!f.contains("time_based"));
        assert!(!f.contains("rwmixread"));
    }

    const SAMPLE: &str = include_str!("../testdata/fio-randrw.json");

    #[test]
    fn parses_fio_json_with_leading_noise() {
        let m = parse_fio_json(&format!("fio: some warning\n{SAMPLE}")).unwrap();
        assert_eq!(m.ops, 1000 + 500);
        assert!((m.runtime_s - 2.0).abs() < 1e-9);
        assert!((m.iops - 750.0).abs() < 1e-9);
        assert!((m.mb_per_s - (6_144_000.0 / 2.0 / 1e6)).abs() < 1e-9);
        // Percentiles from the direction with more ops (read), from lat_ns.
        assert!((m.lat_p50_us - 100.0).abs() < 1e-9);
        assert!((m.lat_p99_us - 900.0).abs() < 1e-9);
    }

    #[test]
    fn rejects_broken_output() {
        assert!(parse_fio_json("").is_err());
        assert!(parse_fio_json("{}").is_err());
        assert!(parse_fio_json(r#"{"jobs":[{"error":5}]}"#).is_err());
        assert!(parse_fio_json(r#"{"jobs":[{"error":0,"read":{"total_ios":0}}]}"#).is_err());
        // ops but no percentiles
        assert!(parse_fio_json(r#"{"jobs":[{"read":{"total_ios":3,"runtime":10,"io_bytes":1}}]}"#).is_err());
    }
}
