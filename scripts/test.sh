#!/usr/bin/env bash
# The project's full check, as CI runs it: setup, formatting, lints, every test (with a real Ceph cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

# Tests that need a live cluster must run here, not skip.
export FERRO_REQUIRE_CLUSTER=1

echo "== cargo fmt --all --check"
cargo fmt --all --check
echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test --workspace"
cargo test --workspace
