// SPDX-License-Identifier: LGPL-3.0-or-later
//! `cargo xtask sim ...`: the deterministic multi-OSD simulator (crate `sim`, docs/simulation.md).
//!
//! Runs in this process (the dev profile) by default; `--release` rebuilds and runs the `ferro-sim` binary
//! optimised, for the long mode (`cargo xtask sim --release --seeds 0..5000`).

pub fn run(args: Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    if args.iter().any(|a| a == "--release") {
        let rest: Vec<&String> = args.iter().filter(|a| *a != "--release").collect();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = std::process::Command::new(cargo)
            .args([
                "run",
                "--quiet",
                "--release",
                "-p",
                "sim",
                "--bin",
                "ferro-sim",
                "--",
            ])
            .args(rest)
            .status()?;
        if !st.success() {
            return Err(format!("simulation failed ({st})").into());
        }
        return Ok(());
    }
    match ::sim::cli::main_with_args(&args) {
        0 => Ok(()),
        c => Err(format!("simulation failed (exit {c})").into()),
    }
}
