// SPDX-License-Identifier: LGPL-3.0-or-later
//! Several rounds of the matrix in one run (`--rounds N`): every test runs N times on every group, and the
//! report's row of a test and group is the median of its rounds. On a shared VM a single 15 s row moves up to
//! 2× with the host's minute (docs/benchmarks.md, session 21), whichever OSD kind runs; the median of three
//! rounds, each pairing the two kinds minutes apart, is what a conclusion can rest on. The rounds themselves
//! stay in the report (JSON `rounds`, the table's per-round ratios), so the spread is visible too.

use crate::report::{Measurement, Row};

/// The median of `v` (the mean of the two middle values for an even count); NaN for none. NaN values sort
/// last and so only count when most values are NaN.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    // total_cmp puts NaN (positive) last; drop them so they never become the median of numbers.
    s.retain(|x| !x.is_nan());
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// One test and group over its rounds: the row whose IOPS is the median's (the lower of the middle two for an
/// even count) gives the fields that only make sense together (device counters, schedstat, settle wait, the
/// busiest thread), and every headline number is replaced by the median of that number over the rounds:
/// IOPS, MB/s, p50, p99, OSD CPU per op, RSS, context switches, client and machine CPU per op. Failed rounds
/// are left out; with no round that ran, the first failure.
pub fn combine(rounds: &[Result<Row, String>]) -> Result<Row, String> {
    let ok: Vec<&Row> = rounds.iter().filter_map(|r| r.as_ref().ok()).collect();
    if ok.is_empty() {
        return Err(rounds
            .iter()
            .find_map(|r| r.as_ref().err().cloned())
            .unwrap_or_else(|| "not run".into()));
    }
    let mut by_iops = ok.clone();
    by_iops.sort_by(|a, b| a.m.iops.total_cmp(&b.m.iops));
    let mut row = *by_iops[(by_iops.len() - 1) / 2];
    let med = |f: fn(&Row) -> f64| median(&ok.iter().map(|r| f(r)).collect::<Vec<_>>());
    row.m = Measurement {
        iops: med(|r| r.m.iops),
        mb_per_s: med(|r| r.m.mb_per_s),
        lat_p50_us: med(|r| r.m.lat_p50_us),
        lat_p99_us: med(|r| r.m.lat_p99_us),
        ..row.m
    };
    row.osd_cpu_us_per_op = med(|r| r.osd_cpu_us_per_op);
    row.osd_rss_bytes = med(|r| r.osd_rss_bytes as f64) as u64;
    row.osd_ctxt_vol_per_op = med(|r| r.osd_ctxt_vol_per_op);
    row.osd_ctxt_invol_per_op = med(|r| r.osd_ctxt_invol_per_op);
    row.client_cpu_us_per_op = med(|r| r.client_cpu_us_per_op);
    row.machine_cpu_us_per_op = med(|r| r.machine_cpu_us_per_op);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::row;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[5.0]), 5.0);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[f64::NAN, 1.0, 3.0]), 2.0);
    }

    #[test]
    fn every_headline_number_is_its_own_median() {
        // Round 0 is fast but burns CPU, round 1 slow, round 2 in between with the worst tail.
        let mut a = row(3000.0, 40.0);
        a.osd_rss_bytes = 300 << 20;
        let mut b = row(1000.0, 60.0);
        b.m.lat_p99_us = 900.0;
        b.device = None;
        let mut c = row(2000.0, 50.0);
        c.m.lat_p99_us = 5000.0;
        c.osd_rss_bytes = 200 << 20;
        c.settle = None;
        let m = combine(&[Ok(a), Ok(b), Ok(c)]).unwrap();
        assert_eq!(m.m.iops, 2000.0);
        assert_eq!(m.osd_cpu_us_per_op, 50.0);
        // p99s 4000/3000 = 1333, 900, 5000 → 1333.
        assert!((m.m.lat_p99_us - 4e6 / 3000.0).abs() < 1e-9, "{}", m.m.lat_p99_us);
        assert_eq!(m.osd_rss_bytes, 200 << 20);
        // The fields that belong together come from the median-IOPS round (c): no settle, its device.
        assert!(m.settle.is_none() && m.device.is_some());
        assert_eq!(m.m.ops, c.m.ops);
    }

    #[test]
    fn failed_rounds_are_left_out_and_all_failed_is_an_error() {
        let ok = combine(&[
            Err("timeout".into()),
            Ok(row(1000.0, 10.0)),
            Ok(row(3000.0, 30.0)),
        ])
        .unwrap();
        assert_eq!((ok.m.iops, ok.osd_cpu_us_per_op), (2000.0, 20.0));
        // The even count takes its other fields from the lower middle round.
        assert_eq!(ok.m.ops, row(1000.0, 10.0).m.ops);
        assert_eq!(combine(&[Err("a".into()), Err("b".into())]), Err("a".to_string()));
        assert_eq!(combine(&[]), Err("not run".to_string()));
        assert_eq!(combine(&[Ok(row(7.0, 1.0))]), Ok(row(7.0, 1.0)));
    }
}
