// SPDX-License-Identifier: LGPL-3.0-or-later
//! The oracle: per-object linearizability of what the clients saw.
//!
//! Every write the clients issue is recorded with the time it was first sent and, once answered, the object's
//! new user version from the reply (`MOSDOpReply::user_version`, which the PG assigns in log order:
//! `max(last_user_version, object's) + 1`). Versions order the writes of an object; the object's state at
//! version `v` is the model applied to every successful write with a version `<= v`, in version order.
//!
//! A read is correct when what it returned equals the state at one version it may linearize at:
//! * not older than the newest write acknowledged before the read was sent (`v_lo`): an acknowledged write
//!   is never lost, across crashes, restarts, re-peering and recovery;
//! * and either `v_lo` itself or the version of a write sent before the read completed (a read may see a
//!   write in flight, but nothing from the future).
//!
//! A read is checked as soon as every write to its object sent before it completed has been answered (until
//! then the versions are not all known). A resent write answered twice must report the same version both times
//! (the PG log's reqid dedup); two successful writes must never share an object version.

use std::collections::BTreeMap;
use std::fmt;

/// An object: pool and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    pub pool: i64,
    pub name: String,
}

impl fmt::Display for ObjKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.pool, self.name)
    }
}

/// One change inside a write op (a write op applies all of its mutations atomically).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    WriteFull(Vec<u8>),
    Write {
        off: u64,
        data: Vec<u8>,
    },
    Append(Vec<u8>),
    /// Only ever alone in its op (it answers ENOENT when the object does not exist).
    Delete,
    SetXattr(String, Vec<u8>),
    OmapSet(Vec<(String, Vec<u8>)>),
    OmapRm(Vec<String>),
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mutation::WriteFull(d) => write!(f, "writefull {}B", d.len()),
            Mutation::Write { off, data } => write!(f, "write {off}~{}", data.len()),
            Mutation::Append(d) => write!(f, "append {}B", d.len()),
            Mutation::Delete => write!(f, "delete"),
            Mutation::SetXattr(k, v) => write!(f, "setxattr {k}={}B", v.len()),
            Mutation::OmapSet(kv) => write!(f, "omap-set {} keys", kv.len()),
            Mutation::OmapRm(k) => write!(f, "omap-rm {} keys", k.len()),
        }
    }
}

/// An object's visible state: data, user xattrs (without Ceph's `_` prefix), omap.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjState {
    pub data: Vec<u8>,
    pub xattrs: BTreeMap<String, Vec<u8>>,
    pub omap: BTreeMap<String, Vec<u8>>,
}

impl ObjState {
    fn summary(s: &Option<ObjState>) -> String {
        match s {
            None => "absent".into(),
            Some(s) => format!(
                "data {}B crc {:08x}, {} xattrs, {} omap",
                s.data.len(),
                crc(&s.data),
                s.xattrs.len(),
                s.omap.len()
            ),
        }
    }
}

fn crc(d: &[u8]) -> u32 {
    // FNV-1a: only for trace lines.
    d.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Apply one successful write op to a state.
pub fn apply(state: &mut Option<ObjState>, muts: &[Mutation]) {
    for m in muts {
        if matches!(m, Mutation::Delete) {
            *state = None;
            continue;
        }
        let s = state.get_or_insert_with(ObjState::default);
        match m {
            Mutation::WriteFull(d) => s.data = d.clone(),
            Mutation::Write { off, data } => {
                let off = *off as usize;
                if s.data.len() < off + data.len() {
                    s.data.resize(off + data.len(), 0);
                }
                s.data[off..off + data.len()].copy_from_slice(data);
            }
            Mutation::Append(d) => s.data.extend_from_slice(d),
            Mutation::SetXattr(k, v) => {
                s.xattrs.insert(k.clone(), v.clone());
            }
            Mutation::OmapSet(kv) => {
                for (k, v) in kv {
                    s.omap.insert(k.clone(), v.clone());
                }
            }
            Mutation::OmapRm(ks) => {
                for k in ks {
                    s.omap.remove(k);
                }
            }
            Mutation::Delete => {}
        }
    }
}

#[derive(Debug, Clone)]
struct WriteRec {
    obj: ObjKey,
    muts: Vec<Mutation>,
    sent: u64,
    /// (time the first answer arrived, result, user version).
    acked: Option<(u64, i32, u64)>,
    desc: String,
}

impl WriteRec {
    fn ok_version(&self) -> Option<u64> {
        match self.acked {
            Some((_, 0, v)) => Some(v),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct ReadRec {
    obj: ObjKey,
    sent: u64,
    done: u64,
    result: Option<ObjState>,
    desc: String,
}

/// Identifies a recorded op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpId(pub usize);

#[derive(Debug, Default)]
pub struct Oracle {
    writes: Vec<WriteRec>,
    reads: Vec<ReadRec>,
    by_obj: BTreeMap<ObjKey, Vec<usize>>,
    /// Reads answered but not checked yet (some concurrent write is unanswered).
    pending: Vec<usize>,
    pub reads_checked: u64,
    pub writes_acked: u64,
}

impl Oracle {
    /// A write is issued (first send) at logical time `now`.
    pub fn write_sent(&mut self, obj: &ObjKey, muts: Vec<Mutation>, now: u64, desc: String) -> OpId {
        let id = self.writes.len();
        self.writes.push(WriteRec {
            obj: obj.clone(),
            muts,
            sent: now,
            acked: None,
            desc,
        });
        self.by_obj.entry(obj.clone()).or_default().push(id);
        OpId(id)
    }

    /// A write's answer arrived. Errors (other than ENOENT for a delete of an absent object) are failures.
    pub fn write_acked(&mut self, id: OpId, result: i32, user_version: u64, now: u64) -> Result<(), String> {
        let w = self.writes.get_mut(id.0).ok_or("unknown write")?;
        // ENOENT (nothing applied) is a correct answer when the op deletes, or removes omap keys, of an object
        // that may not exist (Ceph's omap-rm on a missing object answers ENOENT too).
        let may_enoent = w
            .muts
            .iter()
            .any(|m| matches!(m, Mutation::Delete | Mutation::OmapRm(_)));
        if result != 0 && !(may_enoent && result == -2) {
            return Err(format!("write {} on {} answered {result}", w.desc, w.obj));
        }
        if let Some((_, r0, v0)) = w.acked {
            if r0 != result || (result == 0 && v0 != user_version) {
                return Err(format!(
                    "write {} on {} answered twice differently: ({r0}, v{v0}) then ({result}, v{user_version})",
                    w.desc, w.obj
                ));
            }
            return Ok(());
        }
        w.acked = Some((now, result, user_version));
        self.writes_acked += 1;
        if result == 0 {
            let obj = w.obj.clone();
            let dup = self.by_obj.get(&obj).into_iter().flatten().find(|&&o| {
                o != id.0 && self.writes.get(o).and_then(WriteRec::ok_version) == Some(user_version)
            });
            if let Some(&o) = dup {
                return Err(format!(
                    "two writes on {obj} acknowledged at the same version {user_version}: {} and {}",
                    self.writes[o].desc, self.writes[id.0].desc
                ));
            }
        }
        Ok(())
    }

    /// A read was sent at `sent` and answered at `now` with `result` (`None`: ENOENT).
    pub fn read_done(
        &mut self,
        obj: &ObjKey,
        sent: u64,
        now: u64,
        result: Option<ObjState>,
        desc: String,
    ) -> Result<(), String> {
        self.reads.push(ReadRec {
            obj: obj.clone(),
            sent,
            done: now,
            result,
            desc,
        });
        self.pending.push(self.reads.len() - 1);
        self.check_ready()
    }

    /// Check every pending read whose concurrent writes are all answered.
    pub fn check_ready(&mut self) -> Result<(), String> {
        let mut keep = Vec::new();
        let pending = std::mem::take(&mut self.pending);
        let mut err = None;
        for r in pending {
            if err.is_some() {
                keep.push(r);
                continue;
            }
            match self.check_read(r) {
                None => keep.push(r),
                Some(Ok(())) => self.reads_checked += 1,
                Some(Err(e)) => err = Some(e),
            }
        }
        self.pending = keep;
        err.map_or(Ok(()), Err)
    }

    /// Reads still waiting for a concurrent write's answer.
    pub fn unchecked_reads(&self) -> usize {
        self.pending.len()
    }

    /// The state at the newest acknowledged version of every object (for the final sweep and convergence).
    pub fn final_state(&self, obj: &ObjKey) -> Option<ObjState> {
        let ws = self.sorted_ok(obj);
        let mut s = None;
        for w in ws {
            apply(&mut s, &self.writes[w].muts);
        }
        s
    }

    /// Objects ever written.
    pub fn objects(&self) -> Vec<ObjKey> {
        self.by_obj.keys().cloned().collect()
    }

    /// Writes never answered.
    pub fn unanswered_writes(&self) -> Vec<String> {
        self.writes
            .iter()
            .filter(|w| w.acked.is_none())
            .map(|w| format!("{} on {}", w.desc, w.obj))
            .collect()
    }

    fn sorted_ok(&self, obj: &ObjKey) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .by_obj
            .get(obj)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&w| self.writes[w].ok_version().is_some())
            .collect();
        v.sort_by_key(|&w| self.writes[w].ok_version());
        v
    }

    fn check_read(&self, r: usize) -> Option<Result<(), String>> {
        let rd = &self.reads[r];
        let ws: &[usize] = self.by_obj.get(&rd.obj).map_or(&[], |v| v.as_slice());
        // Not ready while a write sent before the read completed is unanswered.
        if ws
            .iter()
            .any(|&w| self.writes[w].sent < rd.done && self.writes[w].acked.is_none())
        {
            return None;
        }
        let v_lo = ws
            .iter()
            .filter_map(|&w| {
                let wr = &self.writes[w];
                match wr.acked {
                    Some((at, 0, v)) if at < rd.sent => Some(v),
                    _ => None,
                }
            })
            .max()
            .unwrap_or(0);
        let mut allowed = vec![v_lo];
        for &w in ws {
            let wr = &self.writes[w];
            if let Some(v) = wr.ok_version()
                && wr.sent < rd.done
                && v > v_lo
            {
                allowed.push(v);
            }
        }
        let sorted = self.sorted_ok(&rd.obj);
        let state_at = |v: u64| {
            let mut s = None;
            for &w in &sorted {
                if self.writes[w].ok_version().is_some_and(|x| x <= v) {
                    apply(&mut s, &self.writes[w].muts);
                }
            }
            s
        };
        for &v in &allowed {
            if state_at(v) == rd.result {
                return Some(Ok(()));
            }
        }
        let mut msg = format!(
            "read {} of {} (sent t{}, done t{}) returned {}; the newest write acknowledged before it is v{v_lo}; \
             allowed states:",
            rd.desc,
            rd.obj,
            rd.sent,
            rd.done,
            ObjState::summary(&rd.result)
        );
        for &v in &allowed {
            msg.push_str(&format!(" [v{v}: {}]", ObjState::summary(&state_at(v))));
        }
        msg.push_str("; history:");
        for &w in &sorted {
            let wr = &self.writes[w];
            msg.push_str(&format!(
                " [v{} {} sent t{} acked t{}]",
                wr.ok_version().unwrap_or(0),
                wr.desc,
                wr.sent,
                wr.acked.map_or(0, |a| a.0)
            ));
        }
        Some(Err(msg))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn k() -> ObjKey {
        ObjKey {
            pool: 1,
            name: "o".into(),
        }
    }

    fn st(d: &[u8]) -> Option<ObjState> {
        Some(ObjState {
            data: d.to_vec(),
            ..ObjState::default()
        })
    }

    #[test]
    fn lost_acked_write_is_caught() {
        let mut o = Oracle::default();
        let w = o.write_sent(&k(), vec![Mutation::WriteFull(b"a".to_vec())], 1, "w1".into());
        o.write_acked(w, 0, 5, 2).unwrap();
        // A later read that does not see it (the write was lost) fails.
        assert!(o.read_done(&k(), 3, 4, None, "r".into()).is_err());
    }

    #[test]
    fn concurrent_write_may_or_may_not_be_seen() {
        let mut o = Oracle::default();
        let w1 = o.write_sent(&k(), vec![Mutation::WriteFull(b"a".to_vec())], 1, "w1".into());
        o.write_acked(w1, 0, 5, 2).unwrap();
        let w2 = o.write_sent(&k(), vec![Mutation::Append(b"b".to_vec())], 3, "w2".into());
        o.read_done(&k(), 4, 5, st(b"a"), "r-old".into()).unwrap();
        o.read_done(&k(), 4, 5, st(b"ab"), "r-new".into()).unwrap();
        assert_eq!(o.unchecked_reads(), 2, "checked only once w2 is answered");
        o.write_acked(w2, 0, 6, 6).unwrap();
        o.check_ready().unwrap();
        assert_eq!(o.reads_checked, 2);
        // A read that sees something no write produced fails.
        assert!(o.read_done(&k(), 7, 8, st(b"b"), "bad".into()).is_err());
    }

    #[test]
    fn future_write_cannot_be_seen_and_versions_are_unique() {
        let mut o = Oracle::default();
        let w1 = o.write_sent(&k(), vec![Mutation::WriteFull(b"a".to_vec())], 5, "w1".into());
        o.write_acked(w1, 0, 3, 6).unwrap();
        // The read completed (t4) before w1 was even sent.
        assert!(o.read_done(&k(), 1, 4, st(b"a"), "r".into()).is_err());
        let mut o = Oracle::default();
        let a = o.write_sent(&k(), vec![Mutation::Append(b"a".to_vec())], 1, "a".into());
        let b = o.write_sent(&k(), vec![Mutation::Append(b"b".to_vec())], 1, "b".into());
        o.write_acked(a, 0, 3, 2).unwrap();
        assert!(o.write_acked(b, 0, 3, 2).is_err());
        assert!(
            o.write_acked(a, 0, 4, 3).is_err(),
            "a dup answer must repeat the version"
        );
    }

    #[test]
    fn model_semantics() {
        let mut s = None;
        apply(
            &mut s,
            &[
                Mutation::Write {
                    off: 2,
                    data: b"xy".to_vec(),
                },
                Mutation::SetXattr("k".into(), b"v".to_vec()),
                Mutation::OmapSet(vec![("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())]),
            ],
        );
        apply(
            &mut s,
            &[
                Mutation::OmapRm(vec!["a".into()]),
                Mutation::Append(b"z".to_vec()),
            ],
        );
        let s1 = s.clone().unwrap();
        assert_eq!(s1.data, b"\0\0xyz");
        assert_eq!(s1.omap.len(), 1);
        apply(&mut s, &[Mutation::Delete]);
        assert!(s.is_none());
    }
}
