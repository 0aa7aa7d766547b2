#!/usr/bin/env bash
# Latency of the IchorUser admission webhook (issue 6): the real router served over HTTPS on
# loopback, driven at a paced 200 requests/s for 10 s with writes that need no user list (a
# viewer creating a viewer, an admin renaming a viewer). Prints p50/p99/max latency and errors.
#
# Usage: hack/bench/webhook.sh [SECONDS] [RATE]
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
export WEBHOOK_BENCH_SECONDS="${1:-10}"
export WEBHOOK_BENCH_RPS="${2:-200}"

cargo bench -q -p ichor-reconcilers --manifest-path "$root/Cargo.toml" --bench webhook
