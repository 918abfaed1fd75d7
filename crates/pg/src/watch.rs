// SPDX-License-Identifier: LGPL-3.0-or-later
//! Watch/notify state (placeholder; filled in by a later commit).

use denc::Utime;

use crate::ConnId;

#[derive(Debug, Default)]
pub(crate) struct WatchState {}

impl WatchState {
    pub fn next_timeout(&self) -> Option<Utime> {
        None
    }
    pub fn disconnect(&mut self, _conn: ConnId, _now: Utime) {}
}
