// SPDX-License-Identifier: LGPL-3.0-or-later
//! `ferro-sim`: run simulation seeds (`cargo run --release -p sim -- --seeds 0..5000` for the long mode;
//! `cargo xtask sim --seed S` for one seed).

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::ExitCode::from(sim::cli::main_with_args(&args) as u8)
}
