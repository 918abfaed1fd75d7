// SPDX-License-Identifier: LGPL-3.0-or-later
//! Starting and stopping the cores: pinned threads, the N×N SPSC mesh, doorbells, and the injector through which
//! threads outside the runtime (signal handlers, admin sockets, tests) reach a core.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use crate::core::{CoreConfig, CoreCtx, CoreId, CoreStats, Envelope, Service};
use crate::spsc;
use crate::sys;

/// How many cores and how they are set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub cores: usize,
    /// Pin core i to `cpus[i % cpus.len()]`, or with `cpus` empty to the i-th CPU this process may run on
    /// (wrapping around). Pinning failures are not fatal unless `strict_pin`.
    pub pin: bool,
    /// The CPUs to pin to, in core order (with `pin`); empty: the allowed CPUs, ascending.
    pub cpus: Vec<usize>,
    /// A listed CPU this process may not run on, or a pinning the kernel refuses, fails [`Runtime::start`]
    /// instead of leaving the core unpinned (an operator asked for exactly these CPUs).
    pub strict_pin: bool,
    /// Slots of each SPSC ring of the mesh (per ordered pair of cores).
    pub mesh_capacity: usize,
    pub core: CoreConfig,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cores: 1,
            pin: true,
            cpus: Vec::new(),
            strict_pin: false,
            mesh_capacity: 4096,
            core: CoreConfig::default(),
        }
    }
}

struct Doorbell {
    efd: RawFd,
    sleeping: AtomicBool,
    /// A duplicate of the core's ring fd (-1 until the core has its ring), the target of `IORING_OP_MSG_RING`
    /// wake-ups from other cores. Owned here, closed with the runtime: the ring lives as long as any core may
    /// still address it.
    ring_fd: AtomicI32,
}

/// State every core can see: doorbells, the injector, the stop flag. Nothing on the data path takes a lock.
pub(crate) struct Shared<M> {
    doorbells: Vec<Doorbell>,
    injected: Vec<Mutex<VecDeque<M>>>,
    injected_flag: Vec<AtomicBool>,
    stop: AtomicBool,
}

impl<M> Drop for Shared<M> {
    fn drop(&mut self) {
        for d in &self.doorbells {
            sys::close(d.efd);
            let r = d.ring_fd.load(Ordering::Acquire);
            if r >= 0 {
                sys::close(r);
            }
        }
    }
}

impl<M> Shared<M> {
    pub(crate) fn doorbell_fd(&self, core: CoreId) -> RawFd {
        self.doorbells[core].efd
    }

    pub(crate) fn set_sleeping(&self, core: CoreId, v: bool) {
        self.doorbells[core].sleeping.store(v, Ordering::SeqCst);
    }

    /// Publish (a duplicate of) `core`'s ring fd for MSG_RING wake-ups.
    pub(crate) fn set_ring_fd(&self, core: CoreId, fd: RawFd) {
        let old = self.doorbells[core].ring_fd.swap(fd, Ordering::AcqRel);
        if old >= 0 {
            sys::close(old);
        }
    }

    /// `core`'s ring fd, if it has published one.
    pub(crate) fn ring_fd(&self, core: CoreId) -> Option<RawFd> {
        let fd = self.doorbells[core].ring_fd.load(Ordering::Acquire);
        (fd >= 0).then_some(fd)
    }

    /// Claim the wake-up of `core` if it announced it sleeps: true means the caller must wake it (a MSG_RING
    /// entry on the caller's ring, or [`Shared::ring_eventfd`]).
    pub(crate) fn claim_wake(&self, core: CoreId) -> bool {
        self.doorbells[core].sleeping.swap(false, Ordering::SeqCst)
    }

    /// Wake `core` through its eventfd.
    pub(crate) fn ring_eventfd(&self, core: CoreId) {
        sys::eventfd_signal(self.doorbells[core].efd);
    }

    pub(crate) fn has_injected(&self, core: CoreId) -> bool {
        self.injected_flag[core].load(Ordering::Acquire)
    }

    pub(crate) fn take_injected(&self, core: CoreId) -> VecDeque<M> {
        self.injected_flag[core].store(false, Ordering::Release);
        match self.injected[core].lock() {
            Ok(mut q) => std::mem::take(&mut *q),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        }
    }

    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub(crate) fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        for d in &self.doorbells {
            sys::eventfd_signal(d.efd);
        }
    }
}

struct StopOnPanic<M>(Arc<Shared<M>>);

impl<M> Drop for StopOnPanic<M> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.request_stop();
        }
    }
}

/// A running set of cores. Dropping it stops and joins them.
pub struct Runtime<M: Send + 'static> {
    shared: Arc<Shared<M>>,
    threads: Vec<JoinHandle<CoreStats>>,
}

impl<M: Send + 'static> Runtime<M> {
    /// Start `cfg.cores` pinned threads; on each, `factory(core_id)` builds that core's service (on the core's
    /// own thread, so the service may be `!Send`), then the core runs its loop until [`Runtime::stop`] or
    /// [`CoreCtx::stop_all`]. Returns once every core has its ring (or the first setup error).
    pub fn start<S, F>(cfg: RuntimeConfig, factory: F) -> io::Result<Self>
    where
        S: Service<Msg = M>,
        F: Fn(CoreId) -> S + Send + Sync + 'static,
    {
        let n = cfg.cores.max(1);
        let mut doorbells = Vec::with_capacity(n);
        for _ in 0..n {
            doorbells.push(Doorbell {
                efd: sys::eventfd()?,
                sleeping: AtomicBool::new(false),
                ring_fd: AtomicI32::new(-1),
            });
        }
        let shared = Arc::new(Shared {
            doorbells,
            injected: (0..n).map(|_| Mutex::new(VecDeque::new())).collect(),
            injected_flag: (0..n).map(|_| AtomicBool::new(false)).collect(),
            stop: AtomicBool::new(false),
        });
        // The mesh: tx[i][j] sends from core i to core j; rx[j][i] receives it.
        let mut tx: Vec<Vec<Option<spsc::Producer<Envelope<M>>>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        let mut rx: Vec<Vec<Option<spsc::Consumer<Envelope<M>>>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        for (i, txi) in tx.iter_mut().enumerate() {
            for (j, slot) in txi.iter_mut().enumerate() {
                if i != j {
                    let (p, c) = spsc::channel(cfg.mesh_capacity);
                    *slot = Some(p);
                    rx[j][i] = Some(c);
                }
            }
        }
        let allowed = sys::allowed_cpus();
        let strict = cfg.pin && cfg.strict_pin;
        if strict && let Some(&bad) = cfg.cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {bad} is not among the CPUs this process may run on ({allowed:?})"),
            ));
        }
        let cpus = match (cfg.pin, cfg.cpus.is_empty()) {
            (false, _) => Vec::new(),
            (true, true) => allowed,
            (true, false) => cfg.cpus.clone(),
        };
        let factory = Arc::new(factory);
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let mut threads = Vec::with_capacity(n);
        for (id, (txi, rxi)) in tx.into_iter().zip(rx).enumerate() {
            let shared2 = shared.clone();
            let shared_for_guard = shared.clone();
            let factory = factory.clone();
            let ready = ready_tx.clone();
            let core_cfg = cfg.core.clone();
            let cpu = (!cpus.is_empty()).then(|| cpus[id % cpus.len()]);
            let h = std::thread::Builder::new()
                .name(format!("ferro-core-{id}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        // Best effort unless strict: a container may forbid it; the core still works unpinned.
                        if let Err(e) = sys::pin_to(cpu)
                            && strict
                        {
                            let _ = ready.send(Err(io::Error::new(
                                e.kind(),
                                format!("pinning core {id} to CPU {cpu}: {e}"),
                            )));
                            return CoreStats::default();
                        }
                    }
                    let mut ctx = match CoreCtx::new(id, n, core_cfg, txi, rxi, shared2) {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return CoreStats::default();
                        }
                    };
                    // A core that panics takes the whole runtime down (the others stop cleanly): an OSD missing a
                    // core would silently stop serving its PGs.
                    let _stop_on_panic = StopOnPanic(shared_for_guard);
                    let mut svc = factory(id);
                    let _ = ready.send(Ok(()));
                    drop(ready);
                    ctx.run(&mut svc);
                    ctx.stats()
                })?;
            threads.push(h);
        }
        drop(ready_tx);
        let rt = Runtime { shared, threads };
        for _ in 0..n {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::other("a core thread died during start-up")),
            }
        }
        Ok(rt)
    }

    pub fn num_cores(&self) -> usize {
        self.threads.len()
    }

    /// Hand `msg` to `core` from a thread outside the runtime (a mutex-protected queue plus the doorbell; cores
    /// talk to each other over the lock-free mesh instead). Delivered as `on_cross_core(usize::MAX, msg)`.
    pub fn post(&self, core: CoreId, msg: M) -> Result<(), M> {
        let Some(q) = self.shared.injected.get(core) else {
            return Err(msg);
        };
        match q.lock() {
            Ok(mut q) => q.push_back(msg),
            Err(p) => p.into_inner().push_back(msg),
        }
        self.shared.injected_flag[core].store(true, Ordering::Release);
        std::sync::atomic::fence(Ordering::SeqCst);
        sys::eventfd_signal(self.shared.doorbells[core].efd);
        Ok(())
    }

    /// Ask every core to stop (returns at once; see [`Runtime::join`]).
    pub fn stop(&self) {
        self.shared.request_stop();
    }

    /// Whether a stop was requested (by [`Runtime::stop`] or a core's [`CoreCtx::stop_all`]).
    pub fn is_stopping(&self) -> bool {
        self.shared.stop_requested()
    }

    /// Wait for every core to finish; returns each core's counters (a panicked core gives defaults, and its
    /// panic stopped every other core).
    pub fn join(mut self) -> Vec<CoreStats> {
        self.threads
            .drain(..)
            .map(|h| h.join().unwrap_or_default())
            .collect()
    }
}

impl<M: Send + 'static> Drop for Runtime<M> {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shared.request_stop();
            for h in self.threads.drain(..) {
                let _ = h.join();
            }
        }
    }
}
