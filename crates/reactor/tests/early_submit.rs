// SPDX-License-Identifier: LGPL-3.0-or-later
//! `CoreConfig::early_device_submit`: device entries queued while the turn's messages are delivered reach the
//! kernel before `on_poll` processes the device's waiting completions, not only at the turn's end.
//!
//! The "device" writes one byte into a pipe per message posted to the core (an io_uring WRITE, done inline when
//! submitted). The first write's completion is left untaken, so it waits for `on_poll` when the second message
//! arrives; `on_poll` then looks into the pipe: with early submission the second byte is already there, without it
//! not yet.
#![allow(clippy::unwrap_used)]

use io_uring::opcode;
use io_uring::types::Fd;
use reactor::{CoreConfig, CoreCtx, CoreId, CoreStats, DeviceRing, Runtime, RuntimeConfig, Service};
use std::sync::mpsc;
use std::time::Duration;

struct Node {
    ring: Option<DeviceRing>,
    pipe: [i32; 2],
    seen: mpsc::Sender<Vec<u8>>,
    written: usize,
    first_seen: bool,
    check: bool,
    taken: Vec<(u64, i32)>,
}

const BYTES: &[u8; 2] = b"xy";

impl Service for Node {
    type Msg = ();
    fn on_start(&mut self, ctx: &mut CoreCtx<()>) {
        self.ring = Some(ctx.device_ring());
    }
    fn on_cross_core(&mut self, _ctx: &mut CoreCtx<()>, _from: CoreId, _msg: ()) {
        let i = self.written;
        let e = opcode::Write::new(Fd(self.pipe[1]), BYTES[i..].as_ptr(), 1).build();
        // SAFETY: BYTES is static; the pipe stays open until the runtime has stopped.
        unsafe { self.ring.as_ref().unwrap().push(e, i as u64) };
        self.written += 1;
        self.check = i == 1;
    }
    fn on_poll(&mut self, _ctx: &mut CoreCtx<()>) {
        // The first write's completion stays with the device until the second message came; once its byte is in
        // the pipe (it was submitted), its completion is in the completion queue and the test posts the second.
        let first_seen = self.written == 1 && !self.first_seen;
        if !self.check && !first_seen {
            return;
        }
        let mut buf = [0u8; 8];
        // SAFETY: reading into a local buffer from our own non-blocking pipe.
        let n = unsafe { libc::read(self.pipe[0], buf.as_mut_ptr().cast(), buf.len()) };
        let got = buf[..n.max(0) as usize].to_vec();
        if first_seen {
            if !got.is_empty() {
                self.first_seen = true;
                self.seen.send(got).unwrap();
            }
            return;
        }
        self.check = false;
        self.seen.send(got).unwrap();
        self.ring.as_ref().unwrap().take(&mut self.taken);
    }
}

/// What `on_poll` of the second message's turn found in the pipe, and the core's counters.
fn run(early: bool) -> (Vec<u8>, CoreStats) {
    let mut pipe = [0i32; 2];
    // SAFETY: pipe2 fills the two descriptors.
    assert_eq!(
        unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) },
        0
    );
    let (seen_tx, seen_rx) = mpsc::channel();
    let rt = Runtime::start(
        RuntimeConfig {
            cores: 1,
            pin: false,
            core: CoreConfig {
                early_device_submit: early,
                ..CoreConfig::default()
            },
            ..Default::default()
        },
        move |_| Node {
            ring: None,
            pipe,
            seen: seen_tx.clone(),
            written: 0,
            first_seen: false,
            check: false,
            taken: Vec::new(),
        },
    )
    .unwrap();
    let core: CoreId = 0;
    rt.post(core, ()).unwrap();
    let first = seen_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(first, b"x");
    rt.post(core, ()).unwrap();
    let seen = seen_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    rt.stop();
    let st = rt.join().remove(0);
    for fd in pipe {
        // SAFETY: our own descriptors, no longer used by the stopped runtime.
        unsafe { libc::close(fd) };
    }
    (seen, st)
}

#[test]
fn device_entries_of_the_turn_reach_the_kernel_before_on_poll() {
    let (seen, st) = run(true);
    assert_eq!(
        seen, b"y",
        "the second write was still queued during on_poll: {st:?}"
    );
    assert!(st.early_device_submits >= 1, "{st:?}");
}

#[test]
fn without_early_submission_they_wait_for_the_turns_end() {
    // The control: the test above can fail.
    let (seen, st) = run(false);
    assert_eq!(seen, b"", "{st:?}");
    assert_eq!(st.early_device_submits, 0, "{st:?}");
}
