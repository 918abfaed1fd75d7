// SPDX-License-Identifier: LGPL-3.0-or-later
//! Reactor turns: how long each core's loop turns take, and what the long ones did.
//!
//! Every op a core serves waits for the turn in progress to end, so one long turn is a latency spike for every
//! op that arrives during it. The reactor times each turn ([`reactor::TurnInfo`], one clock read per turn) and
//! keeps a histogram; this module adds what only the daemon knows — client ops and peer messages handled, mon
//! and mgr messages, checkpoint work started in the store, and the time of the rare periodic pieces (control
//! tick, core tick with its statistics snapshot, osdmap handling, admin commands) — and keeps the turns longer
//! than `ferro_osd_long_turn_us` with that breakdown. Core 0 gathers every core's once a second
//! ([`TurnReport`]); `perf dump` (section `ferro_reactor`) and the admin command `ferro long-turns` show them.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

use denc::Utime;
use reactor::{CoreStats, TURN_HIST_BUCKETS, TurnInfo};

/// Long turns kept per core between reports, and by core 0 for `ferro long-turns` (the newest).
pub const LONG_TURNS_KEPT: usize = 64;

/// Default `ferro_osd_long_turn_us`.
pub const DEFAULT_LONG_TURN_US: u64 = 1000;

/// Work of one turn the reactor does not see. Counters are bumped on the op path (no clock reads); the
/// periodic pieces are timed, since they are rare (a few per second).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TurnNotes {
    /// Client ops executed on this core's shard.
    pub client_ops: u32,
    /// Peer OSD messages (replication, peering, recovery) handled by this core's shard.
    pub peer_msgs: u32,
    /// Heartbeat pings answered.
    pub pings: u32,
    /// Mon / mgr messages handled by control (core 0).
    pub control_msgs: u32,
    /// Tree node bytes the store wrote for a checkpoint started in this turn (the snapshot's serialisation).
    pub checkpoint_node_bytes: u64,
    /// Time in the control tick (mon client, beacons, pg stats, mgr report, heartbeats), µs.
    pub control_tick_us: u32,
    /// Time handling mon / mgr messages (osdmaps included), µs.
    pub control_msgs_us: u32,
    /// Time in the core tick (shard timers, statistics snapshot), µs.
    pub core_tick_us: u32,
    /// Time applying a new osdmap to this core's shard, µs.
    pub map_us: u32,
    /// Time answering admin commands (`perf dump`, op dumps, …), µs.
    pub admin_us: u32,
}

impl TurnNotes {
    fn timed_us(&self) -> u64 {
        u64::from(self.control_tick_us)
            + u64::from(self.control_msgs_us)
            + u64::from(self.core_tick_us)
            + u64::from(self.map_us)
            + u64::from(self.admin_us)
    }
}

/// Microseconds of `d`, saturating (for the notes' u32 fields).
pub fn us32(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// Add the time since `t0` to a timed note.
pub fn add_since(acc: &mut u32, t0: Instant) {
    *acc = acc.saturating_add(us32(t0.elapsed()));
}

/// One turn longer than the threshold.
#[derive(Debug, Clone, Copy)]
pub struct LongTurn {
    pub at: SystemTime,
    pub core: usize,
    pub info: TurnInfo,
    pub notes: TurnNotes,
    /// CPU time the thread used since the previous turn ended (this turn and the submission before it), when
    /// `ferro_osd_turn_cpu_time` is on: `busy_us - cpu_us` is time the thread was runnable but not running.
    pub cpu_us: Option<u64>,
}

impl LongTurn {
    pub fn dump(&self) -> serde_json::Value {
        let n = &self.notes;
        let busy_us = self.info.busy.as_micros() as u64;
        serde_json::json!({
            "time": Utime::from_system_time(self.at).to_iso_utc(),
            "core": self.core,
            "busy_us": busy_us,
            "cqes": self.info.cqes,
            "mesh_in": self.info.mesh_in,
            "timers": self.info.timers,
            "conns_driven": self.info.conns_driven,
            "recv_bytes": self.info.recv_bytes,
            "sent_bytes": self.info.sent_bytes,
            "client_ops": n.client_ops,
            "peer_msgs": n.peer_msgs,
            "pings": n.pings,
            "control_msgs": n.control_msgs,
            "checkpoint_node_bytes": n.checkpoint_node_bytes,
            "control_tick_us": n.control_tick_us,
            "control_msgs_us": n.control_msgs_us,
            "core_tick_us": n.core_tick_us,
            "map_us": n.map_us,
            "admin_us": n.admin_us,
            // The rest: op path work (receives, ops, store, sends), or the thread waiting for a CPU mid-turn.
            "other_us": busy_us.saturating_sub(n.timed_us()),
            "cpu_us": self.cpu_us,
        })
    }
}

/// One core's side: the notes of the turn in progress and the long turns since the last report.
#[derive(Debug)]
pub struct TurnLog {
    pub core: usize,
    threshold: Duration,
    pub notes: TurnNotes,
    recent: Vec<LongTurn>,
    long_count: u64,
    /// The store's checkpoint node bytes at the end of the previous turn.
    node_bytes: u64,
    /// `ferro_osd_turn_cpu_time`: the thread's CPU clock at the end of the previous turn (read every turn).
    cpu_ns: Option<u64>,
}

/// This thread's CPU time (a system call: ~1 µs on a loaded VM, hence only when asked for).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

impl TurnLog {
    pub fn new(core: usize, threshold_us: u64, cpu_time: bool) -> Self {
        TurnLog {
            core,
            threshold: Duration::from_micros(threshold_us.max(1)),
            notes: TurnNotes::default(),
            recent: Vec::new(),
            long_count: 0,
            node_bytes: 0,
            cpu_ns: cpu_time.then(thread_cpu_ns),
        }
    }

    /// End of a turn: keep it if it was long, and start the next turn's notes. `node_bytes`: the store's
    /// cumulative checkpoint node bytes (`None` without a store).
    pub fn end(&mut self, info: &TurnInfo, node_bytes: Option<u64>) {
        if let Some(b) = node_bytes {
            self.notes.checkpoint_node_bytes = b.saturating_sub(self.node_bytes);
            self.node_bytes = b;
        }
        let cpu_us = self.cpu_ns.map(|prev| {
            let now = thread_cpu_ns();
            self.cpu_ns = Some(now);
            now.saturating_sub(prev) / 1000
        });
        if info.busy >= self.threshold {
            self.long_count += 1;
            if self.recent.len() >= LONG_TURNS_KEPT {
                self.recent.remove(0);
            }
            self.recent.push(LongTurn {
                at: SystemTime::now(),
                core: self.core,
                info: *info,
                notes: self.notes,
                cpu_us,
            });
        }
        self.notes = TurnNotes::default();
    }

    /// This core's report for core 0 (takes the long turns gathered since the previous one).
    pub fn report(&mut self, st: &CoreStats) -> TurnReport {
        TurnReport {
            turns: st.turns,
            hist: st.turn_hist,
            busy_ns: st.turn_busy_ns,
            max_ns: st.turn_max_ns,
            long_count: self.long_count,
            long: std::mem::take(&mut self.recent),
            waits: st.waits,
            enters: st.submits,
            cqes: st.cqes,
            direct_sends: st.direct_sends,
            folded_sends: st.folded_sends,
            wait_timers_armed: st.wait_timers_armed,
            msg_cap_holds: st.msg_cap_holds,
        }
    }
}

/// A core's turn statistics, sent to core 0 every second.
#[derive(Debug, Default, Clone)]
pub struct TurnReport {
    pub turns: u64,
    pub hist: [u64; TURN_HIST_BUCKETS],
    pub busy_ns: u64,
    pub max_ns: u64,
    pub long_count: u64,
    pub long: Vec<LongTurn>,
    /// Per-op fixed costs (divide by ops): loop waits (`io_uring_enter` at the end of a turn, sleeping or
    /// not), every `io_uring_enter`, completions reaped, direct `sendmsg` calls, sends folded into an enter
    /// (`REACTOR_FOLD_SENDS`), standing wake-up timeouts armed.
    pub waits: u64,
    pub enters: u64,
    pub cqes: u64,
    pub direct_sends: u64,
    pub folded_sends: u64,
    pub wait_timers_armed: u64,
    /// Connections left with messages for the next turn by the reactor's per-turn message cap.
    pub msg_cap_holds: u64,
}

/// Core 0's view: every core's latest report and the newest long turns of all cores.
#[derive(Debug, Default)]
pub struct TurnBoard {
    pub threshold_us: u64,
    cores: Vec<Option<TurnReport>>,
    long: VecDeque<LongTurn>,
}

/// The label of histogram bucket `i` (µs ranges as [`reactor::turn_bucket`] fills them).
pub fn bucket_label(i: usize) -> String {
    if i == 0 {
        "0-2".into()
    } else if i == TURN_HIST_BUCKETS - 1 {
        format!("{}+", 1u64 << i)
    } else {
        format!("{}-{}", 1u64 << i, 1u64 << (i + 1))
    }
}

impl TurnBoard {
    pub fn new(threshold_us: u64) -> Self {
        TurnBoard {
            threshold_us,
            ..Default::default()
        }
    }

    pub fn set(&mut self, core: usize, mut r: TurnReport) {
        if core >= 1024 {
            return;
        }
        if self.cores.len() <= core {
            self.cores.resize(core + 1, None);
        }
        for t in r.long.drain(..) {
            if self.long.len() >= LONG_TURNS_KEPT {
                self.long.pop_front();
            }
            self.long.push_back(t);
        }
        self.cores[core] = Some(r);
    }

    /// Summed over the cores: turns, histogram, busy time, longest turn, long turns.
    fn total(&self) -> TurnReport {
        let mut t = TurnReport::default();
        for r in self.cores.iter().flatten() {
            t.turns += r.turns;
            t.waits += r.waits;
            t.enters += r.enters;
            t.cqes += r.cqes;
            t.direct_sends += r.direct_sends;
            t.folded_sends += r.folded_sends;
            t.wait_timers_armed += r.wait_timers_armed;
            t.msg_cap_holds += r.msg_cap_holds;
            for (a, b) in t.hist.iter_mut().zip(r.hist) {
                *a += b;
            }
            t.busy_ns += r.busy_ns;
            t.max_ns = t.max_ns.max(r.max_ns);
            t.long_count += r.long_count;
        }
        t
    }

    /// `perf dump` section `ferro_reactor`.
    pub fn perf(&self) -> serde_json::Value {
        let t = self.total();
        let hist: serde_json::Map<String, serde_json::Value> = t
            .hist
            .iter()
            .enumerate()
            .map(|(i, n)| (bucket_label(i), serde_json::json!(n)))
            .collect();
        serde_json::json!({
            "turns": t.turns,
            "turn_busy_sum": t.busy_ns as f64 / 1e9,
            "turn_max_us": t.max_ns / 1000,
            "turn_hist_us": hist,
            "long_turn_threshold_us": self.threshold_us,
            "long_turns": t.long_count,
            "waits": t.waits,
            "uring_enters": t.enters,
            "cqes": t.cqes,
            "direct_sends": t.direct_sends,
            "folded_sends": t.folded_sends,
            "wait_timers_armed": t.wait_timers_armed,
            "msg_cap_holds": t.msg_cap_holds,
        })
    }

    /// `ferro long-turns`: the threshold, per-core counts and the newest long turns (oldest first).
    pub fn dump(&self) -> serde_json::Value {
        let cores: Vec<serde_json::Value> = self
            .cores
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().map(|r| (i, r)))
            .map(|(i, r)| {
                serde_json::json!({
                    "core": i,
                    "turns": r.turns,
                    "turn_max_us": r.max_ns / 1000,
                    "long_turns": r.long_count,
                })
            })
            .collect();
        serde_json::json!({
            "threshold_us": self.threshold_us,
            "cores": cores,
            "long_turns": self.long.iter().map(LongTurn::dump).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(us: u64) -> TurnInfo {
        TurnInfo {
            busy: Duration::from_micros(us),
            cqes: 3,
            ..Default::default()
        }
    }

    #[test]
    fn only_long_turns_are_kept_with_their_notes() {
        let mut log = TurnLog::new(1, 1000, true);
        log.notes.client_ops = 2;
        log.end(&turn(200), Some(0));
        log.notes.map_us = 1500;
        log.end(&turn(1800), Some(8192));
        log.end(&turn(50), Some(8192));
        let st = CoreStats {
            turns: 3,
            waits: 3,
            submits: 4,
            direct_sends: 2,
            folded_sends: 5,
            ..Default::default()
        };
        let r = log.report(&st);
        assert_eq!(r.long_count, 1);
        assert_eq!(r.long.len(), 1);
        let t = r.long[0];
        assert_eq!((t.core, t.notes.map_us, t.notes.client_ops), (1, 1500, 0));
        assert_eq!(t.notes.checkpoint_node_bytes, 8192);
        let j = t.dump();
        assert_eq!(j["busy_us"], 1800);
        assert_eq!(j["other_us"], 300);
        assert!(j["cpu_us"].is_u64(), "{j}");
        // Reported once: the next report has no turns.
        assert!(log.report(&st).long.is_empty());

        let mut b = TurnBoard::new(1000);
        b.set(1, r);
        let d = b.dump();
        assert_eq!(d["long_turns"].as_array().map(Vec::len), Some(1));
        assert_eq!(b.perf()["long_turns"], 1);
        assert_eq!(b.perf()["turns"], 3);
        assert_eq!(
            (
                b.perf()["uring_enters"].clone(),
                b.perf()["direct_sends"].clone(),
                b.perf()["folded_sends"].clone()
            ),
            (4.into(), 2.into(), 5.into())
        );
    }

    #[test]
    fn the_board_keeps_the_newest() {
        let mut b = TurnBoard::new(1000);
        for i in 0..(LONG_TURNS_KEPT as u64 + 10) {
            let mut log = TurnLog::new(0, 1000, false);
            log.end(&turn(1000 + i), None);
            b.set(0, log.report(&CoreStats::default()));
        }
        let d = b.dump();
        let l = d["long_turns"].as_array().cloned().unwrap_or_default();
        assert_eq!(l.len(), LONG_TURNS_KEPT);
        assert_eq!(
            l.last().map(|t| t["busy_us"].clone()),
            Some((1000 + LONG_TURNS_KEPT as u64 + 9).into())
        );
        assert_eq!(bucket_label(0), "0-2");
        assert_eq!(bucket_label(11), "2048-4096");
    }
}
