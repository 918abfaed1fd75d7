// SPDX-License-Identifier: LGPL-3.0-or-later
//! Set-up shared by the integration tests (each test file is its own crate and includes this module).

use msgr2::Config;
use msgr2::auth::{AuthNone, AuthNoneServer, ServerAuth};
use msgr2::blocking::BlockingConnection;
use msgr2::types::{ENTITY_TYPE_CLIENT, ENTITY_TYPE_OSD, EntityName};
use reactor::{ConnId, CoreCtx, ListenProto, ServerAuthFactory};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

/// Hold a new connection's receives for 300 ms (a timer with token 0; resume them in `on_timer`), so its peer
/// queues its messages before any is read, as with a busy OSD core.
#[allow(dead_code)] // not every test file that includes this module holds receives
pub fn hold_receives<M: Send + 'static>(ctx: &mut CoreCtx<M>, conn: ConnId) {
    ctx.pause_recv(conn);
    ctx.set_timer(Duration::from_millis(300), 0);
}

/// A blocking crc-mode client ("client.t", no auth) connected to the msgr2 listener at `addr`.
#[allow(dead_code)] // not every test file that includes this module connects a blocking client
pub fn connect_client(addr: SocketAddr, timeout: Duration) -> BlockingConnection {
    let auth = Box::new(AuthNone::new(EntityName::new(ENTITY_TYPE_CLIENT, "t"), 0));
    BlockingConnection::connect(
        addr,
        Config::new(ENTITY_TYPE_CLIENT, 1),
        auth,
        ENTITY_TYPE_OSD,
        timeout,
    )
    .expect("connect to the test listener")
}
