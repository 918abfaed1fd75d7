// SPDX-License-Identifier: LGPL-3.0-or-later
//! The `raw` reference kind: the same fio tests straight on files beside the OSDs' device files, with no OSD
//! in between, i.e. what this disk and file system can do for the pattern with durable writes. It bounds the
//! rows where the device, not the OSD, sets the pace.
//!
//! Each file has the size of one OSD's device file and lives on the same file system (in the cluster
//! directory). fio uses `ioengine=io_uring` with `direct=1` (ferrostore's own interface: one io_uring, O_DIRECT)
//! and `sync=dsync` (the file opened `O_DSYNC`, so every write completes only once durable, the same
//! `IOCB_DSYNC` write that ferro-osd issues with `RWF_DSYNC`; on a disk without FUA the kernel adds a cache
//! flush to each). The region is the first `objects × 4 MiB` bytes of the file: the size of a pool's data set.
//! Random tests draw offsets over the whole region as the rados tests draw them over all objects; sequential
//! tests walk it.
//!
//! Replication: at pool size N every client write is N durable device writes on the same disk (the primary's
//! and N−1 replicas'), all in flight together. The write-only tests therefore run N jobs in parallel, one per
//! file, each at the test's queue depth, and count a client op per N device ops. Reads touch one replica, so
//! they run one job; the 70/30 mix too (it undercounts the mix's replica writes: a looser bound, never a
//! tighter one).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::error::{Result, bad};
use crate::fio::{fio_jobs, job_cpu_us, parse_job, pattern_lines};
use crate::report::Measurement;

/// The fio engine of the raw reference (see the module docs for why).
pub const RAW_ENGINE: &str = "io_uring";

/// One raw fio run: one job per file, in parallel, each with the same pattern.
#[derive(Debug, Clone)]
pub struct RawJob {
    /// The files, one job each.
    pub files: Vec<PathBuf>,
    /// Bytes from the start of each file that the jobs address (a pool's data set).
    pub region_bytes: u64,
    /// fio `rw=`.
    pub rw: String,
    /// Request size.
    pub bs_bytes: u64,
    /// Requests in flight per job.
    pub iodepth: u32,
    /// For `randrw`: percentage of reads.
    pub rwmixread: Option<u32>,
    /// Seconds.
    pub runtime_s: u32,
}

/// Parallel jobs (= files) for a test at `pool_size` replicas: the pool size for tests that only write,
/// one for the rest (see the module docs).
pub fn raw_jobs(rw: &str, pool_size: u32) -> u32 {
    if matches!(rw, "write" | "randwrite") {
        pool_size.max(1)
    } else {
        1
    }
}

/// fio's `filename=` separates names with `:`; escape it.
fn fio_filename(p: &std::path::Path) -> String {
    p.display().to_string().replace(':', "\\:")
}

/// The job file for `job`.
pub fn raw_job_file(job: &RawJob) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "[global]");
    let _ = writeln!(s, "ioengine={RAW_ENGINE}");
    let _ = writeln!(s, "direct=1");
    // O_DSYNC: each write is durable when it completes, like an OSD's.
    let _ = writeln!(s, "sync=dsync");
    // The files are made beforehand; a missing one is an error, not a fresh sparse file.
    let _ = writeln!(s, "allow_file_create=0");
    let _ = writeln!(s, "offset=0");
    let _ = writeln!(s, "size={}", job.region_bytes);
    pattern_lines(
        &mut s,
        &job.rw,
        job.bs_bytes,
        job.iodepth,
        job.rwmixread,
        Some(job.runtime_s),
    );
    for (i, f) in job.files.iter().enumerate() {
        let _ = writeln!(s, "[raw{i}]");
        let _ = writeln!(s, "filename={}", fio_filename(f));
    }
    s
}

/// One test on the raw files, in client ops (a client op is `jobs` device ops).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawRow {
    /// Client-equivalent numbers: ops, IOPS and MB/s are the jobs' sums divided by `jobs`; p50 and p99 are the
    /// largest of the jobs' (a replicated op waits for all its device writes, so its percentiles are at least
    /// every job's).
    pub m: Measurement,
    /// Parallel jobs (files).
    pub jobs: u32,
    /// fio's own CPU (user + system of its jobs) per client op: the cost floor of submitting and reaping the IO.
    pub fio_cpu_us_per_op: f64,
    /// Busy CPU of the whole machine per client op (kernel threads that complete flushes included).
    pub machine_cpu_us_per_op: f64,
}

/// Parses fio's JSON for a raw run of `jobs` parallel jobs into a row (`machine_cpu_us_per_op` is left 0 for
/// the caller, who measured it).
pub fn parse_raw_fio(text: &str, jobs: u32) -> Result<RawRow> {
    let all = fio_jobs(text)?;
    if jobs == 0 || all.len() != jobs as usize {
        return Err(bad(
            "fio",
            format!("expected {jobs} raw job(s), output has {}", all.len()),
        ));
    }
    let mut ops = 0u64;
    let (mut iops, mut mb_per_s, mut p50, mut p99, mut cpu_us, mut runtime_s) =
        (0.0, 0.0, 0.0f64, 0.0f64, 0.0, 0.0f64);
    for j in &all {
        let m = parse_job(j)?;
        ops += m.ops;
        iops += m.iops;
        mb_per_s += m.mb_per_s;
        p50 = p50.max(m.lat_p50_us);
        p99 = p99.max(m.lat_p99_us);
        runtime_s = runtime_s.max(m.runtime_s);
        cpu_us += job_cpu_us(j)?;
    }
    let n = f64::from(jobs);
    let client_ops = ops / u64::from(jobs);
    if client_ops == 0 {
        return Err(bad("fio", "no I/O completed"));
    }
    Ok(RawRow {
        m: Measurement {
            ops: client_ops,
            runtime_s,
            iops: iops / n,
            mb_per_s: mb_per_s / n,
            lat_p50_us: p50,
            lat_p99_us: p99,
        },
        jobs,
        fio_cpu_us_per_op: cpu_us / client_ops as f64,
        machine_cpu_us_per_op: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(rw: &str, files: usize) -> RawJob {
        RawJob {
            files: (0..files)
                .map(|i| PathBuf::from(format!("/c/raw/raw.{i}")))
                .collect(),
            region_bytes: 1 << 30,
            rw: rw.into(),
            bs_bytes: 4096,
            iodepth: 16,
            rwmixread: None,
            runtime_s: 15,
        }
    }

    #[test]
    fn job_file_is_direct_durable_and_bounded_to_the_data_set() {
        let f = raw_job_file(&job("randwrite", 3));
        for line in [
            "ioengine=io_uring",
            "direct=1",
            "sync=dsync",
            "allow_file_create=0",
            "offset=0",
            "size=1073741824",
            "bs=4096",
            "iodepth=16",
            "rw=randwrite",
            "norandommap=1",
            "time_based=1",
            "runtime=15",
            "percentile_list=50:99",
            "[raw0]",
            "filename=/c/raw/raw.0",
            "[raw2]",
            "filename=/c/raw/raw.2",
        ] {
            assert!(f.lines().any(|l| l == line), "missing {line:?} in\n{f}");
        }
        assert!(!f.contains("[raw3]") && !f.contains("group_reporting"), "{f}");
        let mut mix = job("randrw", 1);
        mix.rwmixread = Some(70);
        mix.files = vec!["/a:b/raw.0".into()];
        let f = raw_job_file(&mix);
        assert!(f.contains("rwmixread=70\nunified_rw_reporting=mixed\n"), "{f}");
        assert!(f.contains("filename=/a\\:b/raw.0\n"), "{f}");
        let f = raw_job_file(&job("read", 1));
        assert!(!f.contains("norandommap"), "{f}");
    }

    #[test]
    fn writes_fan_out_over_the_replicas_reads_do_not() {
        assert_eq!(raw_jobs("randwrite", 3), 3);
        assert_eq!(raw_jobs("write", 3), 3);
        assert_eq!(raw_jobs("randread", 3), 1);
        assert_eq!(raw_jobs("read", 3), 1);
        assert_eq!(raw_jobs("randrw", 3), 1);
        assert_eq!(raw_jobs("randwrite", 1), 1);
        assert_eq!(raw_jobs("randwrite", 0), 1);
    }

    fn fio_job(ops: u64, runtime_ms: u64, p50_ns: u64, p99_ns: u64, usr: f64, sys: f64) -> String {
        format!(
            r#"{{"jobname":"raw","error":0,"job_runtime":{runtime_ms},"usr_cpu":{usr},"sys_cpu":{sys},
            "read":{{"total_ios":0,"io_bytes":0,"runtime":0}},
            "write":{{"total_ios":{ops},"io_bytes":{},"runtime":{runtime_ms},
              "lat_ns":{{"percentile":{{"50.000000":{p50_ns},"99.000000":{p99_ns}}}}}}}}}"#,
            ops * 4096
        )
    }

    #[test]
    fn parallel_jobs_become_client_ops() {
        // Three replicas' files: 3000, 3300 and 2700 writes in 1 s; the slowest job sets the percentiles.
        let text = format!(
            "fio: warning\n{{\"jobs\":[{},{},{}]}}",
            fio_job(3000, 1000, 200_000, 900_000, 5.0, 25.0),
            fio_job(3300, 1000, 300_000, 800_000, 5.0, 25.0),
            fio_job(2700, 1000, 250_000, 1_500_000, 5.0, 25.0)
        );
        let r = parse_raw_fio(&text, 3).unwrap();
        assert_eq!(r.jobs, 3);
        assert_eq!(r.m.ops, 3000);
        assert!((r.m.iops - 3000.0).abs() < 1e-9, "{r:?}");
        assert!((r.m.mb_per_s - 3000.0 * 4096.0 / 1e6).abs() < 1e-9);
        assert!((r.m.lat_p50_us - 300.0).abs() < 1e-9);
        assert!((r.m.lat_p99_us - 1500.0).abs() < 1e-9);
        // 30 % of 1 s in each of three jobs = 900 ms of CPU over 3000 client ops.
        assert!((r.fio_cpu_us_per_op - 300.0).abs() < 1e-9, "{r:?}");
        // One job: the job itself.
        let one = parse_raw_fio(
            &format!("{{\"jobs\":[{}]}}", fio_job(500, 2000, 1_000, 2_000, 1.0, 9.0)),
            1,
        )
        .unwrap();
        assert!((one.m.iops - 250.0).abs() < 1e-9);
        assert!((one.fio_cpu_us_per_op - 400.0).abs() < 1e-9, "{one:?}");
    }

    /// fio 3.33's real output for three jobs (`raw_job_file` with three files, 4 KiB random writes at QD4, 1 s):
    /// 19399, 7576 and 19352 writes in 1001 ms; the second job's p50/p99 are the largest.
    const THREE_JOBS: &str = include_str!("../testdata/fio-raw-3jobs.json");

    #[test]
    fn parses_real_fio_output_of_three_jobs() {
        let r = parse_raw_fio(THREE_JOBS, 3).unwrap();
        assert_eq!(r.m.ops, (19399 + 7576 + 19352) / 3);
        assert!((r.m.iops - 46327.0 / 1.001 / 3.0).abs() < 1e-6, "{r:?}");
        assert!(
            (r.m.lat_p50_us - 230.4).abs() < 1e-9 && (r.m.lat_p99_us - 4947.968).abs() < 1e-9,
            "{r:?}"
        );
        // usr+sys 13.3 %, 12.4 %, 13.2 % of 1000 ms.
        assert!((r.fio_cpu_us_per_op - 389_000.0 / 15442.0).abs() < 1e-6, "{r:?}");
        assert!(parse_raw_fio(THREE_JOBS, 1).is_err());
    }

    #[test]
    fn broken_raw_output_is_an_error() {
        let j = fio_job(100, 1000, 1, 2, 1.0, 1.0);
        assert!(
            parse_raw_fio(&format!("{{\"jobs\":[{j}]}}"), 3).is_err(),
            "job count"
        );
        assert!(parse_raw_fio(&format!("{{\"jobs\":[{j}]}}"), 0).is_err());
        assert!(parse_raw_fio("{\"jobs\":[]}", 1).is_err());
        let no_cpu = j.replace("\"usr_cpu\":1,", "");
        assert!(
            parse_raw_fio(&format!("{{\"jobs\":[{no_cpu}]}}"), 1).is_err(),
            "{no_cpu}"
        );
        let failed = j.replace("\"error\":0", "\"error\":5");
        assert!(parse_raw_fio(&format!("{{\"jobs\":[{failed}]}}"), 1).is_err());
    }
}
