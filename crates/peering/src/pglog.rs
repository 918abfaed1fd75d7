// SPDX-License-Identifier: LGPL-3.0-or-later
//! Log reconciliation against the authoritative log (`PGLog::merge_log`, `proc_replica_log` and
//! `rewind_divergent_log` semantics, for replicated pools): find where a shard's log leaves the authoritative
//! history, drop its divergent entries, and compute the objects it must recover (its missing set).
//!
//! Versions are unique across the PG's history, so an entry of the shard's log that also appears in the
//! authoritative log (or is older than its tail) is shared history; everything newer that does not appear is
//! divergent: writes that never completed on enough replicas to survive the interval change.

use std::collections::{BTreeMap, BTreeSet};

use denc::{Eversion, HObject};
use osd_types::pg_log::{PgLogEntry, log_op};
use osd_types::pg_log_t::PgLog;
use osd_types::pg_missing::{PgMissing, PgMissingItem};

/// The outcome of reconciling one shard's log with the authoritative one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Newest version both logs share.
    pub common: Eversion,
    /// The shard's entries that are not in the authoritative history (newest last).
    pub divergent: Vec<PgLogEntry>,
    /// Objects that only divergent writes created: the shard must delete its copy.
    pub remove: Vec<HObject>,
    /// Authoritative entries the shard lacks (oldest first).
    pub appended: Vec<PgLogEntry>,
    /// The shard's missing set afterwards.
    pub missing: PgMissing,
    /// The shard's `last_update` afterwards (the authoritative head).
    pub head: Eversion,
}

/// Why a shard cannot be brought up to date from the log alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeedMore {
    /// The shard's `last_update` is not in the authoritative log and we do not have its log: query it.
    Log,
    /// The shard is older than the authoritative log's tail (or empty while the log was trimmed): backfill.
    Backfill,
}

/// Reconcile a shard with `auth`. `shard_log` is the shard's log if known; without it only `shard_last_update`
/// is known, which is enough when that version is part of the authoritative history.
pub fn reconcile(
    auth: &PgLog,
    shard_last_update: Eversion,
    shard_log: Option<&PgLog>,
    shard_missing: &PgMissing,
) -> Result<Reconciled, NeedMore> {
    let auth_versions: BTreeSet<Eversion> = auth.log.iter().map(|e| e.version).collect();
    let shared = |v: Eversion| v == auth.head || v <= auth.tail || auth_versions.contains(&v);
    // 1. the divergence point
    let mut divergent = Vec::new();
    let common = match shard_log {
        _ if shard_last_update == Eversion::default() && auth.tail > Eversion::default() => {
            return Err(NeedMore::Backfill);
        }
        Some(log) => {
            let mut common = None;
            for e in log.log.iter().rev() {
                if shared(e.version) {
                    common = Some(e.version);
                    break;
                }
                divergent.push(e.clone());
            }
            divergent.reverse();
            match common {
                Some(c) => c,
                None if shared(log.tail) => log.tail,
                None => return Err(NeedMore::Backfill),
            }
        }
        None if shared(shard_last_update) => shard_last_update,
        None => return Err(NeedMore::Log),
    };
    if common < auth.tail && common != Eversion::default() {
        return Err(NeedMore::Backfill);
    }
    if common == Eversion::default() && auth.tail > Eversion::default() {
        return Err(NeedMore::Backfill);
    }
    let mut missing = shard_missing.clone();
    // Objects the shard itself still lacked stay missing; drop items a divergent entry introduced.
    for e in &divergent {
        if missing.missing.get(&e.soid).is_some_and(|i| i.need == e.version) {
            missing.rm(&e.soid);
        }
    }
    // 2. divergent objects: the oldest divergent entry per object tells what the shard had before
    let mut oldest_divergent: BTreeMap<HObject, &PgLogEntry> = BTreeMap::new();
    for e in &divergent {
        oldest_divergent.entry(e.soid.clone()).or_insert(e);
    }
    let appended: Vec<PgLogEntry> = auth.log.iter().filter(|e| e.version > common).cloned().collect();
    let newest_auth: BTreeMap<&HObject, &PgLogEntry> = appended.iter().map(|e| (&e.soid, e)).collect();
    let mut remove = Vec::new();
    for (oid, e) in &oldest_divergent {
        if newest_auth.contains_key(oid) {
            continue; // step 3 sets what it needs
        }
        if e.prior_version == Eversion::default() {
            remove.push(oid.clone());
            missing.rm(oid);
        } else {
            // its copy holds a version that never happened: recover the one before the divergent write
            missing.missing.insert(
                oid.clone(),
                PgMissingItem::new(e.prior_version, Eversion::default(), false),
            );
        }
    }
    // 3. authoritative entries the shard lacks
    for e in &appended {
        let is_delete = matches!(e.op, log_op::DELETE | log_op::LOST_DELETE);
        let have = if oldest_divergent.contains_key(&e.soid) {
            Eversion::default() // its copy is a divergent version: nothing reusable
        } else {
            e.prior_version
        };
        if e.op == log_op::ERROR {
            continue; // error entries change no object
        }
        missing.add(e.soid.clone(), e.version, have, is_delete);
    }
    Ok(Reconciled {
        common,
        divergent,
        remove,
        appended,
        missing,
        head: auth.head,
    })
}

/// `last_complete` for a log and missing set: the newest version before the oldest version still needed.
pub fn last_complete(log: &PgLog, missing: &PgMissing) -> Eversion {
    let Some(oldest_need) = missing.missing.values().map(|i| i.need).min() else {
        return log.head;
    };
    log.log
        .iter()
        .map(|e| e.version)
        .take_while(|v| *v < oldest_need)
        .last()
        .unwrap_or(log.tail)
}

/// Apply a reconciliation to a shard's own log.
pub fn apply(log: &mut PgLog, r: &Reconciled) {
    log.log.retain(|e| e.version <= r.common);
    log.log.extend(r.appended.iter().cloned());
    log.head = r.head;
}

/// The part of `log` after `since`, as a `pg_log_t` to ship (`pg_log_t::copy_after`): the tail becomes the newest
/// entry at or before `since`, so the receiver sees a version it can match against its own log (a `since` that is
/// not in this log, e.g. a divergent `last_update`, must not look like shared history).
pub fn log_since(log: &PgLog, since: Eversion) -> PgLog {
    let tail = log
        .log
        .iter()
        .rev()
        .map(|e| e.version)
        .find(|v| *v <= since)
        .unwrap_or(log.tail);
    PgLog {
        head: log.head,
        tail,
        log: log.log.iter().filter(|e| e.version > tail).cloned().collect(),
        can_rollback_to: log.can_rollback_to,
        rollback_info_trimmed_to: log.rollback_info_trimmed_to.max(tail),
        dups: Vec::new(),
    }
}
