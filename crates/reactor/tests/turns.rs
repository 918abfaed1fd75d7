// SPDX-License-Identifier: LGPL-3.0-or-later
//! The turn-time hook: a turn that spends 3 ms in a timer shows up in `on_turn_end` (with its timer) and in the
//! core's turn histogram.
#![allow(clippy::unwrap_used)]

use reactor::{CoreCtx, Runtime, RuntimeConfig, Service, TimerId, TurnInfo, turn_bucket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Slow {
    done: mpsc::Sender<(TurnInfo, [u64; reactor::TURN_HIST_BUCKETS], u64)>,
    slow_turn: bool,
}

impl Service for Slow {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        ctx.set_timer(Duration::from_millis(5), 1);
    }
    fn on_timer(&mut self, _ctx: &mut CoreCtx<()>, _t: TimerId, _token: u64) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(3) {
            std::hint::spin_loop();
        }
        self.slow_turn = true;
    }
    fn on_turn_end(&mut self, ctx: &mut CoreCtx<()>, turn: &TurnInfo) {
        if std::mem::take(&mut self.slow_turn) {
            let st = ctx.stats();
            self.done.send((*turn, st.turn_hist, st.turn_max_ns)).unwrap();
            ctx.stop_all();
        }
    }
}

#[test]
fn long_turns_are_reported_and_counted() {
    assert_eq!(turn_bucket(Duration::from_nanos(300)), 0);
    assert_eq!(turn_bucket(Duration::from_micros(1)), 0);
    assert_eq!(turn_bucket(Duration::from_micros(2)), 1);
    assert_eq!(turn_bucket(Duration::from_micros(3000)), 11);
    assert_eq!(
        turn_bucket(Duration::from_secs(5)),
        reactor::TURN_HIST_BUCKETS - 1
    );

    let (tx, rx) = mpsc::channel();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 1,
            pin: false,
            ..Default::default()
        },
        move |_| Slow {
            done: tx.clone(),
            slow_turn: false,
        },
    )
    .unwrap();
    let (turn, hist, max_ns) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    rt.join();
    assert!(turn.busy >= Duration::from_millis(3), "{turn:?}");
    assert_eq!(turn.timers, 1);
    assert!(hist[turn_bucket(turn.busy)] >= 1, "{hist:?}");
    assert!(max_ns >= 3_000_000);
}
