// SPDX-License-Identifier: LGPL-3.0-or-later
//! Manual probe: `MON=127.0.0.1:3300 KEY=AQ...== MODE=crc|secure cargo run -p monclient --example monc_probe`.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::time::Duration;

use bytes::Bytes;
use cephx::msgr2_auth::{WANT_MON_OSD_MGR, parse_modes};
use monclient::blocking::{BlockingMonClient, DriverConfig};
use monclient::{Config, EpochOnlyMap, MonTarget};

fn main() {
    let addr = std::env::var("MON").unwrap().parse().unwrap();
    let key = cephx::CryptoKey::from_base64(&std::env::var("KEY").unwrap()).unwrap();
    let modes = parse_modes(&std::env::var("MODE").unwrap_or_else(|_| "secure crc".into()));
    let driver = DriverConfig {
        msgr: msgr2::connection::Config::new(msgr2::types::ENTITY_TYPE_CLIENT, -1),
        connect_timeout: Duration::from_secs(5),
    };
    let auth = monclient::blocking::cephx_auth(
        cephx::EntityName::new(msgr2::types::ENTITY_TYPE_CLIENT, "admin"),
        key,
        WANT_MON_OSD_MGR,
        modes,
    );
    let mons = vec![MonTarget {
        name: "conf".into(),
        addr,
    }];
    let mut c = BlockingMonClient::<EpochOnlyMap>::new(Config::default(), mons, 1, driver, auth).unwrap();
    let r = c.wait_connected(Duration::from_secs(10));
    println!("connected: {r:?} last error {:?}", c.seen.last_error);
    while let Some(e) = c.poll_event() {
        println!("event {e:?}");
    }
    if r.is_ok() {
        let r = c.mon_command(
            vec![r#"{"prefix":"status"}"#.into()],
            Bytes::new(),
            Duration::from_secs(10),
        );
        println!("{r:?}");
    }
}
