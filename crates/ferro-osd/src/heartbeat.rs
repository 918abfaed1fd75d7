// SPDX-License-Identifier: LGPL-3.0-or-later
//! Heartbeats with peer OSDs, as ceph-osd keeps them: which peers (OSDs sharing PGs with us, plus the next and
//! previous up OSDs by id and more until `osd_heartbeat_min_peers`), pings on both heartbeat networks (back =
//! cluster side, front = public side) every `osd_heartbeat_interval`, and when a peer's replies stop for longer
//! than `osd_heartbeat_grace` a failure report to the monitors (MOSDFailure), taken back if it answers again.
//!
//! Sans-IO: the tracker is told the map, the time, sends and replies, and answers what to connect, ping and
//! report; the daemon's core 0 owns the connections.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use denc::{EntityAddr, EntityAddrvec, PgId};
use osdmap::OsdMap;

/// Heartbeat settings (ceph-osd's option names).
#[derive(Debug, Clone, Copy)]
pub struct HbConfig {
    /// `osd_heartbeat_interval` (6 s).
    pub interval: Duration,
    /// `osd_heartbeat_grace` (20 s).
    pub grace: Duration,
    /// `osd_heartbeat_min_peers` (10).
    pub min_peers: usize,
    /// `osd_heartbeat_min_size` (2000): pings are padded to this many bytes.
    pub min_size: u32,
}

impl Default for HbConfig {
    fn default() -> Self {
        HbConfig {
            interval: Duration::from_secs(6),
            grace: Duration::from_secs(20),
            min_peers: 10,
            min_size: 2000,
        }
    }
}

/// One peer's heartbeat state; `C` is the daemon's connection id.
#[derive(Debug, Clone)]
pub struct HbPeer<C> {
    pub up_from: u32,
    pub back_addr: Option<EntityAddr>,
    pub front_addr: Option<EntityAddr>,
    /// The peer's public addresses (what MOSDFailure names).
    pub public_addrs: EntityAddrvec,
    pub back: Option<C>,
    pub front: Option<C>,
    pub first_tx: Option<Instant>,
    pub last_tx: Option<Instant>,
    pub last_rx_back: Option<Instant>,
    pub last_rx_front: Option<Instant>,
    /// A failure report is outstanding at the monitors.
    pub reported: bool,
}

impl<C> HbPeer<C> {
    /// The last time both networks had answered (the older of the two), or the first ping if one never has.
    pub fn last_heard(&self) -> Option<Instant> {
        let first = self.first_tx?;
        Some(
            self.last_rx_back
                .unwrap_or(first)
                .min(self.last_rx_front.unwrap_or(first)),
        )
    }
}

/// What the tracker wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HbAction<C> {
    /// Open a connection to `osd` at `addr` (front: public side).
    Connect {
        osd: i32,
        front: bool,
        addr: EntityAddr,
    },
    Close(C),
    /// Send a ping on this connection.
    Ping(C),
    /// MOSDFailure: `failed` (flags FAILED) or the cancel form, with seconds since we last heard from it.
    Report {
        osd: i32,
        addrs: EntityAddrvec,
        failed: bool,
        failed_for: u32,
    },
}

/// The heartbeat peers and their state.
#[derive(Debug)]
pub struct Heartbeats<C> {
    pub cfg: HbConfig,
    pub peers: BTreeMap<i32, HbPeer<C>>,
    next_ping: Option<Instant>,
    jitter_seed: u64,
}

fn msgr2_addr(av: Option<&EntityAddrvec>) -> Option<EntityAddr> {
    let av = av?;
    av.0.iter()
        .find(|a| a.is_msgr2())
        .or_else(|| av.0.first())
        .copied()
}

/// The OSDs ceph-osd would ping: every OSD in the up or acting set of a PG we are in, then the next and the
/// previous up OSD by id (wrapping), then further up OSDs after us until `min_peers`.
pub fn choose_peers(map: &OsdMap, me: i32, min_peers: usize) -> BTreeSet<i32> {
    let mut want = BTreeSet::new();
    for (pid, pool) in &map.pools {
        for seed in 0..pool.pg_num {
            let Ok(ua) = map.pg_to_up_acting_osds(PgId::new(*pid as u64, seed)) else {
                continue;
            };
            if ua.up.contains(&me) || ua.acting.contains(&me) {
                want.extend(
                    ua.up
                        .iter()
                        .chain(ua.acting.iter())
                        .copied()
                        .filter(|&o| o >= 0 && o != me),
                );
            }
        }
    }
    let up: Vec<i32> = (0..map.max_osd).filter(|&o| o != me && map.is_up(o)).collect();
    if !up.is_empty() {
        let after = up.iter().position(|&o| o > me).unwrap_or(0);
        want.insert(up[after]);
        want.insert(up[(after + up.len() - 1) % up.len()]);
        let mut i = after;
        while want.len() < min_peers.min(up.len()) {
            want.insert(up[i % up.len()]);
            i += 1;
        }
    }
    want.retain(|&o| map.is_up(o));
    want
}

impl<C: Copy + Eq> Heartbeats<C> {
    pub fn new(cfg: HbConfig, seed: u64) -> Self {
        Heartbeats {
            cfg,
            peers: BTreeMap::new(),
            next_ping: None,
            jitter_seed: seed | 1,
        }
    }

    /// A new map (while we are up): peers come and go; a peer that restarted gets fresh connections.
    pub fn set_map(&mut self, map: &OsdMap, me: i32, out: &mut Vec<HbAction<C>>) {
        let want = choose_peers(map, me, self.cfg.min_peers);
        let gone: Vec<i32> = self.peers.keys().filter(|o| !want.contains(o)).copied().collect();
        for o in gone {
            if let Some(p) = self.peers.remove(&o) {
                out.extend(p.back.map(HbAction::Close));
                out.extend(p.front.map(HbAction::Close));
            }
        }
        for o in want {
            let i = o as usize;
            let up_from = map.osd_info.get(i).map_or(0, |x| x.up_from);
            let back_addr = msgr2_addr(map.hb_back_addrs.get(i));
            let front_addr = msgr2_addr(map.hb_front_addrs.get(i));
            let public_addrs = map.client_addrs.get(i).cloned().unwrap_or_default();
            if let Some(p) = self.peers.get_mut(&o) {
                if p.up_from == up_from && p.back_addr == back_addr && p.front_addr == front_addr {
                    p.public_addrs = public_addrs;
                    continue;
                }
                out.extend(p.back.take().map(HbAction::Close));
                out.extend(p.front.take().map(HbAction::Close));
            }
            self.peers.insert(
                o,
                HbPeer {
                    up_from,
                    back_addr,
                    front_addr,
                    public_addrs,
                    back: None,
                    front: None,
                    first_tx: None,
                    last_tx: None,
                    last_rx_back: None,
                    last_rx_front: None,
                    reported: false,
                },
            );
        }
    }

    /// We are not up (or stopping): forget every peer.
    pub fn clear(&mut self, out: &mut Vec<HbAction<C>>) {
        for (_, p) in std::mem::take(&mut self.peers) {
            out.extend(p.back.map(HbAction::Close));
            out.extend(p.front.map(HbAction::Close));
        }
    }

    /// The daemon opened (or failed to open) a connection it was asked for.
    pub fn connecting(&mut self, osd: i32, front: bool, conn: C) {
        if let Some(p) = self.peers.get_mut(&osd) {
            if front {
                p.front = Some(conn);
            } else {
                p.back = Some(conn);
            }
        }
    }

    /// A heartbeat connection closed: reconnect on the next tick.
    pub fn reset(&mut self, conn: C) {
        for p in self.peers.values_mut() {
            if p.back == Some(conn) {
                p.back = None;
            }
            if p.front == Some(conn) {
                p.front = None;
            }
        }
    }

    /// Which peer and network a connection belongs to.
    pub fn peer_of(&self, conn: C) -> Option<(i32, bool)> {
        self.peers.iter().find_map(|(o, p)| {
            if p.back == Some(conn) {
                Some((*o, false))
            } else if p.front == Some(conn) {
                Some((*o, true))
            } else {
                None
            }
        })
    }

    /// A PING_REPLY arrived on `conn`.
    pub fn reply(&mut self, conn: C, now: Instant, out: &mut Vec<HbAction<C>>) {
        let Some((osd, front)) = self.peer_of(conn) else {
            return;
        };
        let Some(p) = self.peers.get_mut(&osd) else { return };
        if front {
            p.last_rx_front = Some(now);
        } else {
            p.last_rx_back = Some(now);
        }
        let healthy = p
            .last_heard()
            .is_some_and(|t| now.saturating_duration_since(t) < self.cfg.grace);
        if p.reported && healthy {
            p.reported = false;
            out.push(HbAction::Report {
                osd,
                addrs: p.public_addrs.clone(),
                failed: false,
                failed_for: 0,
            });
        }
    }

    fn jitter(&mut self) -> Duration {
        // xorshift: ceph-osd waits interval × [0.5, 1.5) between rounds so peers do not ping in lock step.
        let mut x = self.jitter_seed;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter_seed = x;
        let f = 0.5 + (x % 1000) as f64 / 1000.0;
        self.cfg.interval.mul_f64(f)
    }

    /// Time passes: connect what is missing, ping when due, report peers silent for longer than the grace.
    pub fn tick(&mut self, now: Instant, out: &mut Vec<HbAction<C>>) {
        let ping_now = self.next_ping.is_none_or(|t| now >= t);
        if ping_now {
            let j = self.jitter();
            self.next_ping = Some(now + j);
        }
        let grace = self.cfg.grace;
        for (&osd, p) in self.peers.iter_mut() {
            if p.back.is_none()
                && let Some(a) = p.back_addr
            {
                out.push(HbAction::Connect {
                    osd,
                    front: false,
                    addr: a,
                });
            }
            if p.front.is_none()
                && let Some(a) = p.front_addr
            {
                out.push(HbAction::Connect {
                    osd,
                    front: true,
                    addr: a,
                });
            }
            if ping_now {
                p.first_tx.get_or_insert(now);
                p.last_tx = Some(now);
                out.extend(p.back.map(HbAction::Ping));
                out.extend(p.front.map(HbAction::Ping));
            }
            if let Some(t) = p.last_heard() {
                let silent = now.saturating_duration_since(t);
                if silent > grace && !p.reported {
                    p.reported = true;
                    out.push(HbAction::Report {
                        osd,
                        addrs: p.public_addrs.clone(),
                        failed: true,
                        failed_for: silent.as_secs() as u32,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(first: Instant) -> HbPeer<u32> {
        HbPeer {
            up_from: 1,
            back_addr: None,
            front_addr: None,
            public_addrs: EntityAddrvec::default(),
            back: Some(1),
            front: Some(2),
            first_tx: Some(first),
            last_tx: Some(first),
            last_rx_back: None,
            last_rx_front: None,
            reported: false,
        }
    }

    #[test]
    fn silent_peer_is_reported_once_and_cancelled_when_it_answers() {
        let t0 = Instant::now();
        let mut h: Heartbeats<u32> = Heartbeats::new(HbConfig::default(), 7);
        h.peers.insert(3, peer(t0));
        let mut out = Vec::new();
        h.tick(t0 + Duration::from_secs(10), &mut out);
        assert!(!out.iter().any(|a| matches!(a, HbAction::Report { .. })));
        // Only the back network answers: still counts as silent (the older of the two).
        h.reply(1, t0 + Duration::from_secs(15), &mut out);
        out.clear();
        h.tick(t0 + Duration::from_secs(21), &mut out);
        let reports: Vec<_> = out
            .iter()
            .filter(|a| matches!(a, HbAction::Report { .. }))
            .collect();
        assert_eq!(reports.len(), 1);
        assert!(matches!(
            reports[0],
            HbAction::Report {
                osd: 3,
                failed: true,
                failed_for: 21,
                ..
            }
        ));
        out.clear();
        h.tick(t0 + Duration::from_secs(25), &mut out);
        assert!(
            !out.iter().any(|a| matches!(a, HbAction::Report { .. })),
            "reported once"
        );
        // Both answer again: the report is taken back.
        h.reply(2, t0 + Duration::from_secs(26), &mut out);
        h.reply(1, t0 + Duration::from_secs(26), &mut out);
        assert!(out.iter().any(|a| matches!(
            a,
            HbAction::Report {
                osd: 3,
                failed: false,
                ..
            }
        )));
        assert!(!h.peers[&3].reported);
    }

    #[test]
    fn pings_go_on_both_networks_and_missing_connections_are_opened() {
        let t0 = Instant::now();
        let mut h: Heartbeats<u32> = Heartbeats::new(HbConfig::default(), 7);
        let mut p = peer(t0);
        p.front = None;
        p.front_addr = Some(EntityAddr::default());
        h.peers.insert(5, p);
        let mut out = Vec::new();
        h.tick(t0, &mut out);
        assert!(out.contains(&HbAction::Ping(1)));
        assert!(out.iter().any(|a| matches!(
            a,
            HbAction::Connect {
                osd: 5,
                front: true,
                ..
            }
        )));
        out.clear();
        h.tick(t0 + Duration::from_millis(100), &mut out);
        assert!(!out.contains(&HbAction::Ping(1)), "not before the interval");
        out.clear();
        h.tick(t0 + Duration::from_secs(10), &mut out);
        assert!(out.contains(&HbAction::Ping(1)));
    }
}
