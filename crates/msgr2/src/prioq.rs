// SPDX-License-Identifier: LGPL-3.0-or-later
//! The outgoing message queue of a session: highest priority first, FIFO within a priority.
//!
//! A connection usually sees one or two priorities and a queue that fills and empties once per message, so the
//! per-priority FIFOs are kept in a small sorted vector and stay allocated when they run empty: a steady stream of
//! messages then allocates nothing here (a map entry dropped and re-created per message cost a node and a ring
//! buffer allocation each, and the buffer's growth a `realloc`, on every message).

use std::collections::VecDeque;

/// Empty FIFOs are kept while there are at most this many priorities; past it, empty ones are dropped before a
/// new priority is added (priorities are chosen by this process's code, so in practice a handful).
const KEEP_EMPTY: usize = 8;

#[derive(Debug)]
pub(crate) struct PrioQueue<T> {
    /// Sorted by priority, ascending; the highest priority is the last entry.
    lanes: Vec<(u16, VecDeque<T>)>,
    len: usize,
}

impl<T> Default for PrioQueue<T> {
    fn default() -> Self {
        PrioQueue {
            lanes: Vec::new(),
            len: 0,
        }
    }
}

impl<T> PrioQueue<T> {
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn lane(&mut self, prio: u16) -> &mut VecDeque<T> {
        let i = match self.lanes.binary_search_by_key(&prio, |(p, _)| *p) {
            Ok(i) => i,
            Err(_) => {
                if self.lanes.len() >= KEEP_EMPTY {
                    self.lanes.retain(|(_, q)| !q.is_empty());
                }
                let i = self.lanes.partition_point(|(p, _)| *p < prio);
                self.lanes.insert(i, (prio, VecDeque::new()));
                i
            }
        };
        &mut self.lanes[i].1
    }

    /// Queue `m` behind every message of its priority.
    pub(crate) fn push_back(&mut self, prio: u16, m: T) {
        self.lane(prio).push_back(m);
        self.len += 1;
    }

    /// Queue `m` ahead of every message of its priority.
    pub(crate) fn push_front(&mut self, prio: u16, m: T) {
        self.lane(prio).push_front(m);
        self.len += 1;
    }

    /// The oldest message of the highest priority that has one.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let m = self.lanes.iter_mut().rev().find_map(|(_, q)| q.pop_front());
        debug_assert!(m.is_some(), "len says a message is queued");
        self.len -= usize::from(m.is_some());
        m
    }

    pub(crate) fn clear(&mut self) {
        self.lanes.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn highest_priority_first_fifo_within() {
        let mut q = PrioQueue::default();
        q.push_back(127, "a");
        q.push_back(196, "b");
        q.push_back(127, "c");
        q.push_front(127, "z");
        q.push_back(64, "d");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["b", "z", "a", "c", "d"]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_steady_stream_keeps_its_lane() {
        let mut q = PrioQueue::default();
        for i in 0..100 {
            q.push_back(127, i);
            assert_eq!(q.pop(), Some(i));
        }
        assert_eq!(q.lanes.len(), 1, "the emptied lane is kept, not re-created");
        assert!(q.lanes[0].1.capacity() > 0);
    }

    #[test]
    fn many_priorities_drop_empty_lanes() {
        let mut q = PrioQueue::default();
        for p in 0..1000u16 {
            q.push_back(p, p);
            assert_eq!(q.pop(), Some(p));
        }
        assert!(q.lanes.len() <= KEEP_EMPTY + 1, "{} lanes", q.lanes.len());
    }

    proptest! {
        /// Against a map of FIFOs keyed by priority (the structure this replaces).
        #[test]
        fn same_order_as_a_map_of_fifos(ops in proptest::collection::vec((0u8..4, 0u16..12), 0..300)) {
            let mut q = PrioQueue::default();
            let mut model: BTreeMap<u16, VecDeque<u32>> = BTreeMap::new();
            for (i, (op, prio)) in ops.into_iter().enumerate() {
                let i = i as u32;
                match op {
                    0 => { q.push_back(prio, i); model.entry(prio).or_default().push_back(i); }
                    1 => { q.push_front(prio, i); model.entry(prio).or_default().push_front(i); }
                    2 => {
                        let want = model.iter_mut().rev().find_map(|(_, f)| f.pop_front());
                        prop_assert_eq!(q.pop(), want);
                    }
                    _ => {
                        if i.is_multiple_of(7) { q.clear(); model.clear(); }
                    }
                }
                let n: usize = model.values().map(VecDeque::len).sum();
                prop_assert_eq!(q.len(), n);
                prop_assert_eq!(q.is_empty(), n == 0);
                prop_assert!(q.lanes.windows(2).all(|w| w[0].0 < w[1].0));
            }
        }
    }
}
