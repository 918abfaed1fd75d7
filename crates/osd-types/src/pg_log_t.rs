// SPDX-License-Identifier: LGPL-3.0-or-later
//! `pg_log_t`: a PG's log as peering ships it (MOSDPGLog): head and tail versions, the entries in order, the
//! rollback bounds (EC) and the dup entries that remember trimmed requests.

use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, LegacyHeader};

use crate::pg_log::{PgLogDup, PgLogEntry};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgLog {
    /// Newest entry's version (`last_update`).
    pub head: Eversion,
    /// Version just before the oldest entry.
    pub tail: Eversion,
    /// Oldest first.
    pub log: Vec<PgLogEntry>,
    pub can_rollback_to: Eversion,
    pub rollback_info_trimmed_to: Eversion,
    pub dups: Vec<PgLogDup>,
}

impl PgLog {
    /// Entries newer than `v`.
    pub fn entries_after(&self, v: Eversion) -> impl Iterator<Item = &PgLogEntry> {
        self.log.iter().filter(move |e| e.version > v)
    }
}

impl Encode for PgLog {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(7, 3, |e| {
            e.encode(&self.head);
            e.encode(&self.tail);
            e.encode(&self.log);
            e.encode(&self.can_rollback_to);
            e.encode(&self.rollback_info_trimmed_to);
            e.encode(&self.dups);
        })
    }
}
impl Decode for PgLog {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("pg_log_t", 7, LegacyHeader::new(3, 3), |h, d| {
            if h.version < 5 {
                return Err(DecodeError::TooOld {
                    type_name: "pg_log_t",
                    version: h.version,
                    oldest: 5,
                });
            }
            let head = d.decode()?;
            let tail: Eversion = d.decode()?;
            let log = d.decode()?;
            let can_rollback_to = d.decode()?;
            let rollback_info_trimmed_to = if h.version >= 6 { d.decode()? } else { tail };
            let dups = if h.version >= 7 { d.decode()? } else { Vec::new() };
            Ok(PgLog {
                head,
                tail,
                log,
                can_rollback_to,
                rollback_info_trimmed_to,
                dups,
            })
        })
    }
}
