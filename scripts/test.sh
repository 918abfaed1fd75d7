#!/usr/bin/env bash
# The project's full check, as CI runs it: setup, formatting, lints, every test (with a real Ceph cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
[ -f "${HOME:-/root}/.cargo/env" ] && . "${HOME:-/root}/.cargo/env"

# Tests that need a live cluster must run here, not skip.
export FERRO_REQUIRE_CLUSTER=1
if [ -n "${CI:-}" ]; then
    # A one-shot build from scratch: incremental state and full debug info only cost time and disk.
    export CARGO_INCREMENTAL=0
    export CARGO_PROFILE_DEV_DEBUG=line-tables-only
fi

echo "== cargo fmt --all --check"
cargo fmt --all --check
echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test --workspace"
cargo test --workspace
echo "== test.sh: all checks passed in ${SECONDS} s"
