// SPDX-License-Identifier: LGPL-3.0-or-later
//! Every MonMap corpus sample decodes; Pacific samples re-encode byte-identically.

use ceph_corpus::{PACIFIC_FEATURES, check_type};

#[test]
fn monmap() {
    let s = check_type::<monmap::MonMap>("MonMap", PACIFIC_FEATURES);
    if !s.skipped {
        let t = s.total();
        assert_eq!(t.decoded, t.samples, "every MonMap sample must decode: {t:?}");
    }
}
