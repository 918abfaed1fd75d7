// SPDX-License-Identifier: LGPL-3.0-or-later
//! `ferro-osd`: takes ceph-osd's command line. `--mkfs` prepares the data directory; otherwise the daemon runs
//! in the foreground until SIGTERM/SIGINT (it marks itself down first).

use ferro_osd::{args, daemon, mkfs};

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let a = match args::parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ferro-osd: {e}\n{}", args::USAGE);
            std::process::exit(1);
        }
    };
    if a.help {
        print!("{}", args::USAGE);
        return;
    }
    if a.version {
        println!(
            "ferro-osd {} (ceph 16.2.15 compatible)",
            env!("CARGO_PKG_VERSION")
        );
        return;
    }
    if let Err(e) = run(&a) {
        eprintln!("ferro-osd: {e}");
        std::process::exit(1);
    }
}

fn run(a: &args::Args) -> Result<(), String> {
    let (opts, cfg) = args::load(a)?;
    if !a.debug_stderr
        && let Some(log) = &opts.log_file
    {
        // Without -d, stderr goes to the log file (as ceph-osd logs there).
        use std::os::unix::io::AsRawFd;
        if let Some(dir) = log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            // SAFETY: dup2 onto stderr with a valid descriptor we own.
            unsafe { libc::dup2(f.as_raw_fd(), 2) };
        }
    }
    if a.mkfs {
        let dd = mkfs::mkfs(&opts, a.osd_uuid.as_deref())?;
        eprintln!(
            "ferro-osd: created osd.{} (fsid {}) in {} on {} ({} shards)",
            dd.whoami,
            denc::Uuid(dd.osd_fsid),
            opts.osd_data.display(),
            dd.device.display(),
            dd.shards
        );
        return Ok(());
    }
    // Before any core allocates: the receive-buffer pool's bound, malloc's knobs, the idle trimmer.
    ferro_osd::memory::configure(&opts.memory);
    let dd = mkfs::open(&opts)?;
    let (key, _from) = cfg.entity_key().map_err(|e| format!("keyring: {e}"))?;
    let key = cephx::CryptoKey::from_base64(&key).map_err(|e| format!("keyring: {e}"))?;
    daemon::install_signal_handlers();
    let d = daemon::Daemon::new(opts, dd, key)?;
    d.run()
}
