// SPDX-License-Identifier: LGPL-3.0-or-later
//! `PastIntervals` (osd_types.h) in its only current representation, `pi_compact_rep`: the span of epochs
//! `[first, last]` covered, every shard that took part in any interval, and the intervals that may have gone
//! read-write (each with its acting set). Peering uses it to know whom to ask before trusting its own log.

use std::collections::BTreeSet;

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, PgShard};

/// `compact_interval_t`: one interval `[first, last]` that may have gone read-write, with its acting shards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactInterval {
    pub first: u32,
    pub last: u32,
    pub acting: BTreeSet<PgShard>,
}

impl Encode for CompactInterval {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.u32(self.first);
            e.u32(self.last);
            e.encode(&self.acting);
        })
    }
}
impl Decode for CompactInterval {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("compact_interval_t", 1, |_, d| {
            Ok(CompactInterval {
                first: d.u32()?,
                last: d.u32()?,
                acting: d.decode()?,
            })
        })
    }
}

/// `pi_compact_rep`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PiCompactRep {
    pub first: u32,
    pub last: u32,
    pub all_participants: BTreeSet<PgShard>,
    /// In epoch order (a `std::list` on the wire).
    pub intervals: Vec<CompactInterval>,
}

impl Encode for PiCompactRep {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| {
            e.u32(self.first);
            e.u32(self.last);
            e.encode(&self.all_participants);
            e.encode(&self.intervals);
        })
    }
}
impl Decode for PiCompactRep {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("pi_compact_rep", 1, |_, d| {
            Ok(PiCompactRep {
                first: d.u32()?,
                last: d.u32()?,
                all_participants: d.decode()?,
                intervals: d.decode()?,
            })
        })
    }
}

/// `PastIntervals`: absent (`u8 0`) or a `pi_compact_rep` (`u8 2`); type 1, the retired `pi_simple_rep`, is
/// refused as Pacific does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PastIntervals {
    pub rep: Option<PiCompactRep>,
}

impl PastIntervals {
    /// An empty compact representation (what a PG holds once it has a history).
    pub fn new_compact() -> Self {
        PastIntervals {
            rep: Some(PiCompactRep::default()),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.rep
            .as_ref()
            .is_none_or(|r| r.intervals.is_empty() && r.all_participants.is_empty())
    }
    /// The epoch range covered, `(first, last)`; `(0, 0)` when empty.
    pub fn bounds(&self) -> (u32, u32) {
        self.rep.as_ref().map_or((0, 0), |r| (r.first, r.last))
    }
    pub fn intervals(&self) -> &[CompactInterval] {
        self.rep.as_ref().map_or(&[], |r| &r.intervals)
    }
    pub fn all_participants(&self) -> BTreeSet<PgShard> {
        self.rep
            .as_ref()
            .map(|r| r.all_participants.clone())
            .unwrap_or_default()
    }
    /// Record a finished interval `[first, last]` with its acting shards (`pi_compact_rep::add_interval`): every
    /// acting shard becomes a participant; only intervals that may have gone read-write are kept.
    pub fn add_interval(&mut self, first: u32, last: u32, acting: BTreeSet<PgShard>, maybe_went_rw: bool) {
        let rep = self.rep.get_or_insert_with(PiCompactRep::default);
        if rep.first == 0 && rep.last == 0 && rep.intervals.is_empty() && rep.all_participants.is_empty() {
            rep.first = first;
        }
        rep.first = rep.first.min(first);
        rep.last = rep.last.max(last);
        rep.all_participants.extend(acting.iter().copied());
        if maybe_went_rw {
            rep.intervals.push(CompactInterval { first, last, acting });
        }
    }
    /// Forget intervals that ended before `epoch` (after a successful activation, `last_epoch_clean` lets the
    /// primary drop what no longer matters).
    pub fn trim_before(&mut self, epoch: u32) {
        if let Some(rep) = &mut self.rep {
            rep.intervals.retain(|i| i.last >= epoch);
            if rep.intervals.is_empty() {
                *rep = PiCompactRep::default();
            }
        }
    }
}

impl Encode for PastIntervals {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(1, 1, |e| match &self.rep {
            Some(r) => {
                e.u8(2);
                e.encode(r);
            }
            None => e.u8(0),
        })
    }
}
impl Decode for PastIntervals {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct("PastIntervals", 1, |_, d| match d.u8()? {
            0 => Ok(PastIntervals { rep: None }),
            2 => Ok(PastIntervals {
                rep: Some(d.decode()?),
            }),
            t => Err(DecodeError::invalid(
                "PastIntervals",
                format!("representation type {t}"),
            )),
        })
    }
}
