#!/usr/bin/env bash
# Idempotent machine setup for FerroCeph on Debian 12 (bookworm), run as root (or a user with sudo).
# Installs only what is missing: Ceph 16.2 daemons and tools for the throwaway test cluster, fio, a C
# toolchain for native crates, and a Rust toolchain with rustfmt and clippy.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup.sh: run as root or install sudo" >&2; exit 1; }
    SUDO="sudo"
fi

packages=(
    ceph-mon ceph-mgr ceph-osd ceph-common fio python3-rados python3-rbd  # the throwaway cluster
    build-essential pkg-config ca-certificates curl git                   # building (aws-lc-sys needs a C compiler)
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Rust: Debian's rustc is far older than the workspace's rust-version, so use rustup's stable toolchain.
[ -f "${HOME:-/root}/.cargo/env" ] && . "${HOME:-/root}/.cargo/env"
if ! command -v cargo >/dev/null; then
    echo "setup.sh: installing Rust (rustup, stable, minimal profile)"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
        sh -s -- -y --profile minimal --default-toolchain stable --component rustfmt,clippy
    . "${HOME:-/root}/.cargo/env"
fi
if command -v rustup >/dev/null; then
    installed=$(rustup component list --installed 2>/dev/null || true)
    for c in rustfmt clippy; do
        grep -q "^$c" <<<"$installed" || rustup component add "$c"
    done
fi
echo "setup.sh: ok ($(ceph --version | cut -d' ' -f1-3), $(cargo --version))"
