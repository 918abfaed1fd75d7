// SPDX-License-Identifier: LGPL-3.0-or-later
//! Op execution (placeholder: answers EOPNOTSUPP until the next commit).

use ceph_msgs::osd_op::{MOSDOpReply, flag};
use denc::Utime;
use ferrostore::{CollectionId, Device, Store};

use crate::{OpContext, Outputs, Pg, PgError, PgStats};

pub(crate) fn handle_op<D: Device>(_pg: &mut Pg, _store: &mut Store<D>, ctx: OpContext<'_>) -> Outputs {
    let mut out = Outputs::default();
    let r = MOSDOpReply::for_request(&ctx.msg, -libc::EOPNOTSUPP, ctx.epoch, flag::ACK | flag::ONDISK);
    out.replies.push((ctx.conn, r));
    out
}

pub(crate) fn handle_timeout<D: Device>(_pg: &mut Pg, _store: &mut Store<D>, _now: Utime) -> Outputs {
    Outputs::default()
}

pub(crate) fn scan_stats<D: Device>(_store: &mut Store<D>, _cid: &CollectionId) -> Result<PgStats, PgError> {
    Ok(PgStats::default())
}
