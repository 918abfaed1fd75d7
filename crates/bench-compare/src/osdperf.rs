// SPDX-License-Identifier: LGPL-3.0-or-later
//! Where a write's time goes inside the OSDs: each OSD's perf counters read over its admin socket before and
//! after a test, as averages over the test of the group's OSDs. `op_w` is the primary's client write latency,
//! `op_r` is the primary's client read latency (arrival to reply; with the IOPS it gives the reads inside the
//! OSDs by Little's law), `subop` a replica's rep-op latency (receipt to commit reply; ceph-osd's `subop_w_latency`, ferro-osd's
//! `subop_latency`), `commit` the object store's commit latency (BlueStore's `bluestore.commit_lat`,
//! ferro-osd's `osd.commit_latency`). A write at size 3 takes at least the slower replica's `subop` plus two
//! network hops; what `op_w` adds beyond that is queueing on the primary.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// A long-run average as Ceph dumps it (`avgcount`, `sum` in seconds), summed over OSDs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Avg {
    pub count: u64,
    pub sum_s: f64,
}

/// The counters of a group at one moment (sums over its OSDs; OSDs that did not answer are left out).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    pub op_w: Avg,
    pub op_r: Avg,
    pub subop: Avg,
    pub commit: Avg,
    /// OSDs that answered.
    pub osds: usize,
}

/// Average latencies in milliseconds over one test (None where no such event happened or the counter is
/// missing).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OsdLatency {
    pub op_w_ms: Option<f64>,
    pub op_r_ms: Option<f64>,
    pub subop_ms: Option<f64>,
    pub commit_ms: Option<f64>,
}

fn avg(v: &Value, section: &str, names: &[&str]) -> Option<Avg> {
    let s = v.get(section)?;
    names.iter().find_map(|n| {
        let c = s.get(*n)?;
        Some(Avg {
            count: c.get("avgcount")?.as_u64()?,
            sum_s: c.get("sum")?.as_f64()?,
        })
    })
}

/// The counters we want from one `perf dump` answer (either kind of OSD).
pub fn parse(v: &Value) -> Sample {
    Sample {
        op_w: avg(v, "osd", &["op_w_latency"]).unwrap_or_default(),
        op_r: avg(v, "osd", &["op_r_latency"]).unwrap_or_default(),
        subop: avg(v, "osd", &["subop_w_latency", "subop_latency"]).unwrap_or_default(),
        commit: avg(v, "bluestore", &["commit_lat"])
            .or_else(|| avg(v, "osd", &["commit_latency"]))
            .unwrap_or_default(),
        osds: 1,
    }
}

/// One admin socket command (Ceph's protocol: the JSON command and a NUL; a big-endian u32 length and the
/// answer).
pub fn admin_command(asok: &Path, cmd: &str) -> Result<Value, String> {
    let mut s = UnixStream::connect(asok).map_err(|e| format!("{}: {e}", asok.display()))?;
    let t = Some(Duration::from_secs(5));
    s.set_read_timeout(t).map_err(|e| e.to_string())?;
    s.set_write_timeout(t).map_err(|e| e.to_string())?;
    let mut req = serde_json::json!({ "prefix": cmd }).to_string().into_bytes();
    req.push(0);
    s.write_all(&req).map_err(|e| e.to_string())?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(|e| e.to_string())?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 64 << 20 {
        return Err(format!("admin socket answer of {len} bytes"));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| e.to_string())
}

/// The group's counters now (`<cluster>/run/ceph-osd.<id>.asok` for each OSD id).
pub fn sample(cluster_dir: &Path, osd_ids: &[u32]) -> Sample {
    let mut t = Sample::default();
    for id in osd_ids {
        let asok = cluster_dir.join(format!("run/ceph-osd.{id}.asok"));
        if let Ok(v) = admin_command(&asok, "perf dump") {
            let s = parse(&v);
            for (a, b) in [
                (&mut t.op_w, s.op_w),
                (&mut t.op_r, s.op_r),
                (&mut t.subop, s.subop),
                (&mut t.commit, s.commit),
            ] {
                a.count += b.count;
                a.sum_s += b.sum_s;
            }
            t.osds += 1;
        }
    }
    t
}

/// Averages between two samples; nothing when the OSDs that answered differ (a restart resets counters).
pub fn latency(before: &Sample, after: &Sample) -> OsdLatency {
    if before.osds != after.osds || after.osds == 0 {
        return OsdLatency::default();
    }
    let ms = |a: Avg, b: Avg| {
        let n = b.count.checked_sub(a.count).filter(|n| *n > 0)?;
        Some((b.sum_s - a.sum_s).max(0.0) * 1000.0 / n as f64)
    };
    OsdLatency {
        op_w_ms: ms(before.op_w, after.op_w),
        op_r_ms: ms(before.op_r, after.op_r),
        subop_ms: ms(before.subop, after.subop),
        commit_ms: ms(before.commit, after.commit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_kinds_counters_and_deltas() {
        let classic = json!({
            "osd": {"op_w_latency": {"avgcount": 10, "sum": 0.5, "avgtime": 0.05},
                    "op_r_latency": {"avgcount": 40, "sum": 0.8},
                    "subop_latency": {"avgcount": 99, "sum": 9.0},
                    "subop_w_latency": {"avgcount": 20, "sum": 0.4}},
            "bluestore": {"commit_lat": {"avgcount": 30, "sum": 0.3}},
        });
        let s = parse(&classic);
        assert_eq!(
            s.subop,
            Avg {
                count: 20,
                sum_s: 0.4
            },
            "the write sub-ops, not every sub-op"
        );
        assert_eq!(s.commit.count, 30);
        assert_eq!(
            s.op_r,
            Avg {
                count: 40,
                sum_s: 0.8
            }
        );
        let ferro = json!({"osd": {"op_w_latency": {"avgcount": 4, "sum": 0.2},
                                   "subop_latency": {"avgcount": 8, "sum": 0.08},
                                   "commit_latency": {"avgcount": 12, "sum": 0.06}}});
        let f = parse(&ferro);
        assert_eq!((f.op_w.count, f.subop.count, f.commit.count), (4, 8, 12));
        let later = Sample {
            op_w: Avg {
                count: 14,
                sum_s: 1.0,
            },
            op_r: Avg {
                count: 5,
                sum_s: 0.006,
            },
            subop: Avg {
                count: 20,
                sum_s: 0.4,
            },
            commit: Avg {
                count: 12,
                sum_s: 0.06,
            },
            osds: 1,
        };
        let l = latency(&f, &later);
        assert!((l.op_w_ms.unwrap() - 80.0).abs() < 1e-9, "{l:?}");
        assert!((l.subop_ms.unwrap() - 26.666_666).abs() < 1e-3);
        assert_eq!(l.commit_ms, None, "no commits during the test");
        assert!((l.op_r_ms.unwrap() - 1.2).abs() < 1e-9, "{l:?}");
        let one_gone = Sample { osds: 0, ..later };
        assert_eq!(latency(&f, &one_gone), OsdLatency::default());
        assert_eq!(
            parse(&json!({})),
            Sample {
                osds: 1,
                ..Sample::default()
            }
        );
    }
}
