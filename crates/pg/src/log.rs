// SPDX-License-Identifier: LGPL-3.0-or-later
//! The PG log (placeholder; filled in by the next commit).

use denc::{Eversion, SpgId};
use ferrostore::{CollectionId, Device, Op, Store, Transaction};

use crate::{PgConfig, PgError, keys};

#[derive(Debug, Default)]
pub(crate) struct PgLog {
    pub head: Eversion,
    pub complete: Eversion,
}

impl PgLog {
    pub fn create_txn(&self, spgid: &SpgId, cid: &CollectionId, pg_num: u32, _epoch: u32) -> Transaction {
        let mut t = Transaction::new();
        let bits = spgid.pgid.get_split_bits(pg_num);
        t.push(Op::CreateCollection {
            cid: cid.clone(),
            bits,
        });
        t.push(Op::Touch {
            cid: cid.clone(),
            oid: keys::pgmeta_key(spgid),
        });
        t
    }
    pub fn load<D: Device>(
        _s: &mut Store<D>,
        _spgid: &SpgId,
        _cid: &CollectionId,
        _cfg: &PgConfig,
    ) -> Result<Self, PgError> {
        Ok(PgLog::default())
    }
    pub fn on_durable(&mut self, _seq: u64) {}
    pub fn len(&self) -> usize {
        0
    }
}
