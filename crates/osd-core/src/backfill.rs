// SPDX-License-Identifier: LGPL-3.0-or-later
//! Backfill of one PG (owner: the recovery helper; this file starts as a stub the core compiles against):
//! peering's `StartBackfill` names targets that cannot recover from the log; the primary scans its objects in
//! hobject order (and the target's with MOSDPGScan), pushes what differs, removes what the target should not
//! have (MOSDPGBackfillRemove), reports progress with MOSDPGBackfill, throttled by `osd_max_backfills`. The
//! target side answers scans and records `last_backfill` ([`RecoveryEvent::LastBackfill`]).

use denc::SpgId;
use ferrostore::Device;

use crate::{CoreError, RecoveryCtx, RecoveryEvent};

/// Backfill state of one PG (primary or target side).
#[derive(Debug)]
pub struct Backfill {
    spgid: SpgId,
    targets: Vec<i32>,
}

impl Backfill {
    pub fn new(spgid: SpgId) -> Self {
        Backfill {
            spgid,
            targets: Vec::new(),
        }
    }

    /// The PG this state belongs to.
    pub fn spgid(&self) -> SpgId {
        self.spgid
    }

    /// Peering's `Output::StartBackfill` on the primary.
    pub fn start<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, targets: Vec<i32>) {
        let _ = ctx;
        self.targets = targets;
    }

    /// A backfill message for this PG from `osd.<from>`: MOSDPGScan, MOSDPGBackfill, MOSDPGBackfillRemove
    /// (and MOSDPGPush/PushReply while backfilling, which the core routes here when backfill is active).
    pub fn handle_message<D: Device>(
        &mut self,
        ctx: &mut RecoveryCtx<'_, D>,
        from: i32,
        msg: &ceph_msgs::Message,
    ) -> Result<(), CoreError> {
        ctx.out.push(RecoveryEvent::Log(format!(
            "pg {}: backfill message type {} from osd.{from} not handled yet",
            self.spgid, msg.msg_type
        )));
        Ok(())
    }

    /// Store transaction `seq` (and all before it) is durable.
    pub fn on_durable<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>, seq: u64) {
        let _ = (ctx, seq);
    }

    /// Continue work (after inputs that may have freed throttle slots, and on ticks).
    pub fn tick<D: Device>(&mut self, ctx: &mut RecoveryCtx<'_, D>) {
        let _ = ctx;
    }

    /// A new interval (or the PG stops): drop everything in flight.
    pub fn reset(&mut self) {
        self.targets.clear();
    }

    /// Whether backfill work is pending or in flight.
    pub fn is_active(&self) -> bool {
        !self.targets.is_empty()
    }
}
