// SPDX-License-Identifier: LGPL-3.0-or-later
//! The test matrix. Reads come first so that they read what the untimed prefill wrote; writes overwrite
//! parts of the same 4 MiB objects afterwards (as an RBD image sees it); OMAP tests use their own objects.

use crate::error::{BenchError, Result};

/// What one test does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// One fio job with `ioengine=rados` over the pool's 4 MiB objects.
    Fio {
        /// fio `rw=`: `randread`, `randwrite`, `read`, `write` or `randrw`.
        rw: &'static str,
        /// Block size of every request.
        bs_bytes: u64,
        /// Requests in flight.
        iodepth: u32,
        /// For `randrw`: percentage of reads.
        rwmixread: Option<u32>,
    },
    /// Synchronous OMAP operations (queue depth 1) through python3-rados.
    Omap(OmapOp),
}

/// An OMAP operation type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OmapOp {
    /// Set one new 100-byte key per operation on a random object.
    Set,
    /// Get one existing key by name.
    Get,
    /// List 16 keys starting after a random existing key.
    Scan,
}

impl OmapOp {
    /// The mode name the OMAP script understands.
    pub fn mode(self) -> &'static str {
        match self {
            OmapOp::Set => "set",
            OmapOp::Get => "get",
            OmapOp::Scan => "scan",
        }
    }
}

/// One test of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestDef {
    /// Stable id used in JSON and on the command line (`--tests`).
    pub id: &'static str,
    /// Human title for tables and charts.
    pub title: &'static str,
    /// What it does.
    pub workload: Workload,
}

const fn fio(
    id: &'static str,
    title: &'static str,
    rw: &'static str,
    bs_bytes: u64,
    iodepth: u32,
) -> TestDef {
    TestDef {
        id,
        title,
        workload: Workload::Fio {
            rw,
            bs_bytes,
            iodepth,
            rwmixread: None,
        },
    }
}

const K4: u64 = 4 << 10;
const K64: u64 = 64 << 10;
const M4: u64 = 4 << 20;

/// Every test, in execution order.
pub const MATRIX: &[TestDef] = &[
    fio("4k-randread-qd16", "4K random read QD16", "randread", K4, 16),
    fio("4k-randread-qd1", "4K random read QD1", "randread", K4, 1),
    fio("64k-randread-qd16", "64K random read QD16", "randread", K64, 16),
    fio("64k-randread-qd1", "64K random read QD1", "randread", K64, 1),
    fio("4m-seqread-qd4", "4M sequential read QD4", "read", M4, 4),
    fio("4k-randwrite-qd16", "4K random write QD16", "randwrite", K4, 16),
    fio("4k-randwrite-qd1", "4K random write QD1", "randwrite", K4, 1),
    fio(
        "64k-randwrite-qd16",
        "64K random write QD16",
        "randwrite",
        K64,
        16,
    ),
    fio("64k-randwrite-qd1", "64K random write QD1", "randwrite", K64, 1),
    fio("4m-seqwrite-qd4", "4M sequential write QD4", "write", M4, 4),
    TestDef {
        id: "4k-randrw70-qd16",
        title: "4K random 70% read / 30% write QD16",
        workload: Workload::Fio {
            rw: "randrw",
            bs_bytes: K4,
            iodepth: 16,
            rwmixread: Some(70),
        },
    },
    TestDef {
        id: "omap-set-qd1",
        title: "OMAP set 1 key QD1",
        workload: Workload::Omap(OmapOp::Set),
    },
    TestDef {
        id: "omap-get-qd1",
        title: "OMAP get 1 key QD1",
        workload: Workload::Omap(OmapOp::Get),
    },
    TestDef {
        id: "omap-scan16-qd1",
        title: "OMAP list 16 keys QD1",
        workload: Workload::Omap(OmapOp::Scan),
    },
];

/// Does `filter` select test `id`? It must match at the start of the id or of a `-`-separated part, so
/// that `4k-randread` does not also pick `64k-randread`.
fn matches(id: &str, filter: &str) -> bool {
    id.starts_with(filter) || id.contains(&format!("-{filter}"))
}

/// The tests selected by `filters` (see [`matches`]; all tests if `filters` is empty), in matrix order. A
/// filter matching nothing is an error, so that a typo does not silently run nothing.
pub fn select_tests(filters: &[String]) -> Result<Vec<TestDef>> {
    if filters.is_empty() {
        return Ok(MATRIX.to_vec());
    }
    for f in filters {
        if !MATRIX.iter().any(|t| matches(t.id, f)) {
            let ids: Vec<&str> = MATRIX.iter().map(|t| t.id).collect();
            return Err(BenchError::Usage(format!(
                "no test matches {f:?}; tests are: {}",
                ids.join(", ")
            )));
        }
    }
    Ok(MATRIX
        .iter()
        .filter(|t| filters.iter().any(|f| matches(t.id, f)))
        .copied()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_cover_the_issue() {
        let mut ids: Vec<&str> = MATRIX.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), MATRIX.len());
        for (bs, rw, qd) in [
            (K4, "randread", 16),
            (K4, "randread", 1),
            (K64, "randwrite", 1),
            (M4, "write", 4),
        ] {
            assert!(MATRIX.iter().any(|t| t.workload
                == Workload::Fio {
                    rw,
                    bs_bytes: bs,
                    iodepth: qd,
                    rwmixread: None
                }));
        }
        assert_eq!(
            MATRIX
                .iter()
                .filter(|t| matches!(t.workload, Workload::Omap(_)))
                .count(),
            3
        );
    }

    #[test]
    fn selection_by_substring_keeps_matrix_order() {
        let sel = select_tests(&["omap".into(), "4k-randread".into()]).unwrap();
        let ids: Vec<&str> = sel.iter().map(|t| t.id).collect();
        assert_eq!(
            ids,
            [
                "4k-randread-qd16",
                "4k-randread-qd1",
                "omap-set-qd1",
                "omap-get-qd1",
                "omap-scan16-qd1"
            ]
        );
        assert!(select_tests(&["nope".into()]).is_err());
        assert_eq!(select_tests(&[]).unwrap().len(), MATRIX.len());
    }
}
