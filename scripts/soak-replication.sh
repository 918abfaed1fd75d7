#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-3.0-or-later
# Replication soak (issue 6; not in CI): a throwaway cluster (classic mon, 4 ferro-osds, pool of size 3 /
# min_size 2), a write load logging every acknowledged write, one random OSD at a time killed -9 and restarted
# for MINUTES (default 10). At the end every acknowledged write is read back byte-exact and the replicas of every
# PG compared; prints "SOAK SUMMARY: ...". Exit status 0 only with zero lost or corrupt acknowledged writes.
#
# usage: scripts/soak-replication.sh [MINUTES]      (FERRO_SOAK_SEED=N replays a kill sequence)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
export FERRO_SOAK_MINUTES="$minutes"
export FERRO_REQUIRE_CLUSTER=1
log="${TMPDIR:-/tmp}/soak-replication.log"
set +e
cargo test -p ferro-osd --test replication soak_random_kills_under_load -- --ignored --nocapture --test-threads=1 \
    2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
echo
grep -h "SOAK SUMMARY" "$log" || echo "soak: no summary (failed, exit $status; see $log)"
exit "$status"
