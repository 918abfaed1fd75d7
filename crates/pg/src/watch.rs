// SPDX-License-Identifier: LGPL-3.0-or-later
//! Watch/notify state (Ceph's Watch.cc), sans-IO: timers are deadlines the PG reports through `poll_timeout`.
//!
//! * A watch is bound to the connection that registered it. Watches registered with WATCH (not LEGACY_WATCH)
//!   are pinged by the client; they time out `timeout` seconds after the last ping (or registration). Legacy
//!   watches time out `timeout` seconds after their connection closed.
//! * A notify is sent to every watch of the object; it completes when every watch acknowledged it or was
//!   removed, or when its timeout passes (then with -ETIMEDOUT and the list of watchers that missed it). The
//!   completion goes to the notifier's connection as a NOTIFY_COMPLETE whose data segment holds
//!   `map<(gid, cookie), reply>` and `vector<(gid, cookie)>` of the missed ones.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use ceph_msgs::osd_op::{MWatchNotify, watch_event};
use denc::{Encoder, EntityNameT, HObject, Utime};

use crate::ConnId;

/// A watch: (object sort key, cookie, entity).
pub(crate) type WatchKey = (Bytes, u64, EntityNameT);

#[derive(Debug)]
pub(crate) struct Watch {
    pub obj: HObject,
    pub conn: Option<ConnId>,
    pub will_ping: bool,
    pub last_ping: Utime,
    pub timeout_secs: u32,
    pub deadline: Option<Utime>,
    pub in_progress: BTreeSet<u64>,
}

#[derive(Debug)]
struct Notify {
    conn: ConnId,
    client_gid: u64,
    cookie: u64,
    version: u64,
    deadline: Utime,
    watchers: BTreeSet<WatchKey>,
    replies: BTreeMap<(u64, u64), Bytes>,
    payload: Bytes,
}

#[derive(Debug, Default)]
pub(crate) struct WatchState {
    watches: BTreeMap<WatchKey, Watch>,
    notifies: BTreeMap<u64, Notify>,
    next_id: u32,
}

pub(crate) type Msgs = Vec<(ConnId, MWatchNotify)>;

fn add_secs(t: Utime, s: u32) -> Utime {
    Utime::new(t.sec.saturating_add(s), t.nsec)
}

impl WatchState {
    pub fn next_timeout(&self) -> Option<Utime> {
        let w = self.watches.values().filter_map(|w| w.deadline).min();
        let n = self.notifies.values().map(|n| n.deadline).min();
        match (w, n) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Watches recorded in an object's info but unknown here (after a restart): disconnected, timing out.
    pub fn populate(
        &mut self,
        okey: &Bytes,
        obj: &HObject,
        watchers: &[(u64, EntityNameT, u32)],
        now: Utime,
    ) {
        for &(cookie, entity, timeout) in watchers {
            self.watches
                .entry((okey.clone(), cookie, entity))
                .or_insert_with(|| Watch {
                    obj: crate::repl::owned_hobject(obj),
                    conn: None,
                    will_ping: false,
                    last_ping: now,
                    timeout_secs: timeout,
                    deadline: Some(add_secs(now, timeout)),
                    in_progress: BTreeSet::new(),
                });
        }
    }

    #[allow(clippy::too_many_arguments)]
    /// `Watch::connect`: (re)bind a watch to `conn`; in-progress notifies are sent to it.
    pub fn connect(
        &mut self,
        key: WatchKey,
        obj: &HObject,
        timeout_secs: u32,
        conn: ConnId,
        will_ping: bool,
        now: Utime,
        out: &mut Msgs,
    ) {
        let w = self.watches.entry(key.clone()).or_insert_with(|| Watch {
            obj: crate::repl::owned_hobject(obj),
            conn: None,
            will_ping,
            last_ping: now,
            timeout_secs,
            deadline: None,
            in_progress: BTreeSet::new(),
        });
        if w.conn == Some(conn) {
            return;
        }
        w.conn = Some(conn);
        w.will_ping = will_ping;
        for id in &w.in_progress {
            if let Some(n) = self.notifies.get(id) {
                out.push((conn, notify_msg(key.1, n, *id)));
            }
        }
        if will_ping {
            w.last_ping = now;
            w.deadline = Some(add_secs(now, w.timeout_secs));
        } else {
            w.deadline = None;
        }
    }

    /// PING: Err(-ETIMEDOUT) if the watch is not connected (the client must reconnect).
    pub fn ping(&mut self, key: &WatchKey, now: Utime) -> Result<(), i32> {
        match self.watches.get_mut(key) {
            Some(w) if w.conn.is_some() => {
                w.last_ping = now;
                w.deadline = Some(add_secs(now, w.timeout_secs));
                Ok(())
            }
            _ => Err(-libc::ETIMEDOUT),
        }
    }

    /// `Watch::remove`: drop the watch; DISCONNECT to its client if asked and connected; its notifies stop
    /// waiting for it.
    pub fn remove(&mut self, key: &WatchKey, send_disconnect: bool, out: &mut Msgs) {
        let Some(w) = self.watches.remove(key) else { return };
        if send_disconnect && let Some(c) = w.conn {
            out.push((
                c,
                MWatchNotify {
                    cookie: key.1,
                    opcode: watch_event::DISCONNECT,
                    ..Default::default()
                },
            ));
        }
        for id in w.in_progress {
            if let Some(n) = self.notifies.get_mut(&id) {
                n.watchers.remove(key);
            }
            self.maybe_complete(id, false, out);
        }
    }

    /// A connection closed: its watches lose their connection; legacy ones start their timeout.
    pub fn disconnect(&mut self, conn: ConnId, now: Utime) {
        for w in self.watches.values_mut() {
            if w.conn == Some(conn) {
                w.conn = None;
                if !w.will_ping {
                    w.deadline = Some(add_secs(now, w.timeout_secs));
                }
            }
        }
    }

    /// Start a notify on object `okey` for the notifier on `conn`; returns its id. Messages to the watchers (and
    /// the completion, if there are none) are appended to `out`.
    /// A fresh notify id: `(epoch << 32) | counter`, as the OSD makes them.
    pub fn reserve_notify_id(&mut self, epoch: u32) -> u64 {
        // the OSD's counter is post-incremented: its first id has 0 in the low half
        let n = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        (u64::from(epoch) << 32) | u64::from(n)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn start_notify(
        &mut self,
        okey: &Bytes,
        id: u64,
        conn: ConnId,
        client_gid: u64,
        cookie: u64,
        version: u64,
        payload: Bytes,
        timeout_secs: u32,
        now: Utime,
        out: &mut Msgs,
    ) {
        let mut n = Notify {
            conn,
            client_gid,
            cookie,
            version,
            deadline: add_secs(now, timeout_secs),
            watchers: BTreeSet::new(),
            replies: BTreeMap::new(),
            payload: payload.clone(),
        };
        let keys: Vec<WatchKey> = self.watches.keys().filter(|k| k.0 == *okey).cloned().collect();
        for k in keys {
            let Some(w) = self.watches.get_mut(&k) else {
                continue;
            };
            if w.will_ping && add_secs(w.last_ping, w.timeout_secs) < now {
                // not pinged within its timeout: Ceph disconnects it and leaves it out of the notify
                w.conn = None;
                continue;
            }
            w.in_progress.insert(id);
            n.watchers.insert(k.clone());
            if let Some(c) = w.conn {
                out.push((
                    c,
                    MWatchNotify {
                        cookie: k.1,
                        ver: version,
                        notify_id: id,
                        opcode: watch_event::NOTIFY,
                        bl: payload.clone(),
                        notifier_gid: client_gid,
                        ..Default::default()
                    },
                ));
            }
        }
        self.notifies.insert(id, n);
        self.maybe_complete(id, false, out);
    }

    /// NOTIFY_ACK from `entity` (for the watch with `cookie`, or all its watches on the object).
    pub fn ack(
        &mut self,
        okey: &Bytes,
        entity: EntityNameT,
        cookie: Option<u64>,
        notify_id: u64,
        reply: Bytes,
        out: &mut Msgs,
    ) {
        let keys: Vec<WatchKey> = self
            .watches
            .keys()
            .filter(|k| k.0 == *okey && k.2 == entity && cookie.is_none_or(|c| c == k.1))
            .cloned()
            .collect();
        for k in keys {
            let Some(w) = self.watches.get_mut(&k) else {
                continue;
            };
            if !w.in_progress.remove(&notify_id) {
                continue;
            }
            if let Some(n) = self.notifies.get_mut(&notify_id)
                && n.watchers.remove(&k)
            {
                n.replies.insert((k.2.num as u64, k.1), reply.clone());
            }
            self.maybe_complete(notify_id, false, out);
        }
    }

    fn maybe_complete(&mut self, id: u64, timed_out: bool, out: &mut Msgs) {
        let Some(n) = self.notifies.get(&id) else { return };
        if !n.watchers.is_empty() && !timed_out {
            return;
        }
        let Some(n) = self.notifies.remove(&id) else {
            return;
        };
        let mut e = Encoder::new(0);
        e.u32(n.replies.len() as u32);
        for ((gid, cookie), bl) in &n.replies {
            e.u64(*gid);
            e.u64(*cookie);
            e.bytes(bl);
        }
        e.u32(n.watchers.len() as u32);
        for k in &n.watchers {
            e.u64(k.2.num as u64);
            e.u64(k.1);
        }
        for k in &n.watchers {
            if let Some(w) = self.watches.get_mut(k) {
                w.in_progress.remove(&id);
            }
        }
        out.push((
            n.conn,
            MWatchNotify {
                cookie: n.cookie,
                ver: n.version,
                notify_id: id,
                opcode: watch_event::NOTIFY_COMPLETE,
                return_code: if timed_out { -libc::ETIMEDOUT } else { 0 },
                notifier_gid: n.client_gid,
                data: e.into_bytes(),
                ..Default::default()
            },
        ));
    }

    /// Expire notifies and watches whose deadline passed. Returns the expired watches (the PG removes them from
    /// their objects' info).
    pub fn expire(&mut self, now: Utime, out: &mut Msgs) -> Vec<(WatchKey, HObject)> {
        let due: Vec<u64> = self
            .notifies
            .iter()
            .filter(|(_, n)| n.deadline <= now)
            .map(|(i, _)| *i)
            .collect();
        for id in due {
            self.maybe_complete(id, true, out);
        }
        let expired: Vec<WatchKey> = self
            .watches
            .iter()
            .filter(|(_, w)| w.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        let mut res = Vec::new();
        for k in expired {
            let obj = self.watches.get(&k).map(|w| w.obj.clone());
            self.remove(&k, true, out);
            if let Some(o) = obj {
                res.push((k, o));
            }
        }
        res
    }
}

fn notify_msg(cookie: u64, n: &Notify, id: u64) -> MWatchNotify {
    MWatchNotify {
        cookie,
        ver: n.version,
        notify_id: id,
        opcode: watch_event::NOTIFY,
        bl: n.payload.clone(),
        notifier_gid: n.client_gid,
        ..Default::default()
    }
}
