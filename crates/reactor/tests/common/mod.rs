// SPDX-License-Identifier: LGPL-3.0-or-later
//! Set-up shared by the integration tests (each test file is its own crate and includes this module).

use msgr2::Config;
use msgr2::auth::{AuthNoneServer, ServerAuth};
use msgr2::types::ENTITY_TYPE_OSD;
use reactor::{CoreCtx, ListenProto, ServerAuthFactory};
use std::net::SocketAddr;
use std::sync::Arc;

/// Server auth that accepts everyone (crc mode).
pub fn auth_none() -> ServerAuthFactory {
    Arc::new(|| Box::new(AuthNoneServer::default()) as Box<dyn ServerAuth + Send>)
}

/// A msgr2 listener (an OSD, entity 0) on a free loopback port of this core; its address.
pub fn listen_msgr2<M: Send + 'static>(ctx: &mut CoreCtx<M>, auth: ServerAuthFactory) -> SocketAddr {
    let proto = ListenProto::Msgr2 {
        cfg: Config::new(ENTITY_TYPE_OSD, 0),
        auth,
    };
    ctx.listen("127.0.0.1:0".parse().expect("literal address"), proto)
        .expect("listen on loopback")
        .1
}
