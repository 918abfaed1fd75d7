// SPDX-License-Identifier: LGPL-3.0-or-later
//! A PG of an existing pool that a map newly places on an OSD must not go active empty: its first primary there
//! takes the PG's earlier placement as history, probes the OSDs that held it and serves their writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Cluster;

/// Size 2 / min_size 1 on 3 OSDs: every OSD is marked out (the PGs map nowhere), then one is marked in and
/// becomes the only OSD of every PG, including PGs it never held. Every acknowledged write stays readable.
#[test]
fn pg_newly_placed_here_keeps_acknowledged_writes() {
    let mut c = Cluster::new(3, 2, 1, 4);
    let mut tids = Vec::new();
    for i in 0..24 {
        tids.push(c.write_full(&format!("p{i}"), format!("placed {i}").as_bytes()));
    }
    c.run();
    for t in &tids {
        assert_eq!(c.reply(*t).unwrap().result, 0);
    }
    c.publish(|b| {
        for o in 0..3 {
            b.mark_out(o).unwrap();
        }
    });
    c.run();
    c.advance_time(Duration::from_secs(1));
    c.publish(|b| {
        b.mark_in(0).unwrap();
    });
    c.run();
    for _ in 0..20 {
        c.advance_time(Duration::from_secs(1));
        c.run();
    }
    for i in 0..24 {
        let r = c.read(&format!("p{i}"));
        c.run();
        for _ in 0..5 {
            if c.reply(r).is_some() {
                break;
            }
            c.advance_time(Duration::from_secs(1));
            c.run();
        }
        assert_eq!(
            c.read_data(r).expect("acknowledged object lost or unreadable"),
            format!("placed {i}").as_bytes(),
            "{:?}",
            &c.logs[c.logs.len().saturating_sub(20)..]
        );
    }
}
