// SPDX-License-Identifier: LGPL-3.0-or-later
//! `pg_missing_item` and `pg_missing_t` (`pg_missing_set<false>`): the objects a shard lacks, the version it needs
//! and the version it has, plus whether entries may be deletes. The byte image of an item depends on the peer's
//! features: Octopus and later start it with the sentinels `0'0` and `-1'-1` and carry clean regions.

use std::collections::BTreeMap;

use denc::features::{MASK_SERVER_OCTOPUS, has};
use denc::{Decode, DecodeError, Decoder, Encode, Encoder, Eversion, HObject, LegacyHeader};

use crate::pg_log::ObjectCleanRegions;

/// `pg_missing_item::FLAG_DELETE`.
pub const MISSING_FLAG_DELETE: u8 = 1;

/// `pg_missing_item`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgMissingItem {
    pub need: Eversion,
    pub have: Eversion,
    pub flags: u8,
    pub clean_regions: ObjectCleanRegions,
    /// The form it arrived in; re-encoding keeps it (when the peer's features allow), so bytes round-trip.
    pub form: ItemForm,
}

/// The three byte images of a `pg_missing_item`, oldest first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum ItemForm {
    /// `need, have` (before OSD_RECOVERY_DELETES).
    Legacy,
    /// `0'0, need, have, flags`.
    RecoveryDeletes,
    /// `0'0, -1'-1, need, have, flags, clean_regions` (SERVER_OCTOPUS).
    #[default]
    Octopus,
}

impl Default for PgMissingItem {
    fn default() -> Self {
        PgMissingItem {
            need: Eversion::default(),
            have: Eversion::default(),
            flags: 0,
            clean_regions: ObjectCleanRegions::fully_dirty(),
            form: ItemForm::Octopus,
        }
    }
}

impl PgMissingItem {
    pub fn new(need: Eversion, have: Eversion, is_delete: bool) -> Self {
        PgMissingItem {
            need,
            have,
            flags: if is_delete { MISSING_FLAG_DELETE } else { 0 },
            clean_regions: ObjectCleanRegions::fully_dirty(),
            form: ItemForm::Octopus,
        }
    }
    pub fn is_delete(&self) -> bool {
        self.flags & MISSING_FLAG_DELETE != 0
    }
}

const ALL_ONES: Eversion = Eversion {
    version: u64::MAX,
    epoch: u32::MAX,
};

impl Encode for PgMissingItem {
    fn encode(&self, e: &mut Encoder) {
        let form = if has(e.features(), MASK_SERVER_OCTOPUS) {
            self.form
        } else {
            self.form.min(ItemForm::RecoveryDeletes)
        };
        match form {
            ItemForm::Octopus => {
                e.encode(&Eversion::default());
                e.encode(&ALL_ONES);
                e.encode(&self.need);
                e.encode(&self.have);
                e.u8(self.flags);
                e.encode(&self.clean_regions);
            }
            ItemForm::RecoveryDeletes => {
                e.encode(&Eversion::default());
                e.encode(&self.need);
                e.encode(&self.have);
                e.u8(self.flags);
            }
            ItemForm::Legacy => {
                e.encode(&self.need);
                e.encode(&self.have);
            }
        }
    }
}
impl Decode for PgMissingItem {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        let first: Eversion = d.decode()?;
        if first != Eversion::default() {
            // A real need is never 0'0, so a non-zero first version is the legacy form.
            return Ok(PgMissingItem {
                need: first,
                have: d.decode()?,
                form: ItemForm::Legacy,
                ..Default::default()
            });
        }
        let second: Eversion = d.decode()?;
        if second == ALL_ONES {
            Ok(PgMissingItem {
                need: d.decode()?,
                have: d.decode()?,
                flags: d.u8()?,
                clean_regions: d.decode()?,
                form: ItemForm::Octopus,
            })
        } else {
            Ok(PgMissingItem {
                need: second,
                have: d.decode()?,
                flags: d.u8()?,
                clean_regions: ObjectCleanRegions::fully_dirty(),
                form: ItemForm::RecoveryDeletes,
            })
        }
    }
}

/// `pg_missing_t`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgMissing {
    pub missing: BTreeMap<HObject, PgMissingItem>,
    pub may_include_deletes: bool,
}

impl Default for PgMissing {
    fn default() -> Self {
        PgMissing {
            missing: BTreeMap::new(),
            may_include_deletes: true,
        }
    }
}

impl PgMissing {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty()
    }
    pub fn len(&self) -> usize {
        self.missing.len()
    }
    pub fn is_missing(&self, oid: &HObject) -> bool {
        self.missing.contains_key(oid)
    }
    /// `add_next_event` for one log entry: the object now needs `need`; what it has stays what it had before the
    /// first missed update (`prior` when it was not yet missing).
    pub fn add(&mut self, oid: HObject, need: Eversion, prior: Eversion, is_delete: bool) {
        match self.missing.get_mut(&oid) {
            Some(item) => {
                item.need = need;
                item.flags = if is_delete { MISSING_FLAG_DELETE } else { 0 };
            }
            None => {
                self.missing
                    .insert(oid, PgMissingItem::new(need, prior, is_delete));
            }
        }
    }
    /// The object was recovered up to `v` (`got`): forget it once it has what it needs.
    pub fn got(&mut self, oid: &HObject, v: Eversion) {
        if self.missing.get(oid).is_some_and(|i| i.need <= v) {
            self.missing.remove(oid);
        }
    }
    pub fn rm(&mut self, oid: &HObject) {
        self.missing.remove(oid);
    }
}

impl Encode for PgMissing {
    fn encode(&self, e: &mut Encoder) {
        e.versioned(5, 2, |e| {
            e.encode(&self.missing);
            e.bool(self.may_include_deletes);
        })
    }
}
impl Decode for PgMissing {
    fn decode(d: &mut Decoder) -> Result<Self, DecodeError> {
        d.decode_struct_legacy("pg_missing_t", 5, LegacyHeader::new(2, 2), |h, d| {
            if h.version < 3 {
                return Err(DecodeError::TooOld {
                    type_name: "pg_missing_t",
                    version: h.version,
                    oldest: 3,
                });
            }
            Ok(PgMissing {
                missing: d.decode()?,
                may_include_deletes: if h.version >= 4 { d.bool()? } else { false },
            })
        })
    }
}
