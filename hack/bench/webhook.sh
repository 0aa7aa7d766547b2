#!/usr/bin/env bash
# Latency of the IchorUser admission webhook: the real router served over HTTPS on loopback,
# driven at a paced 200 requests/s for 10 s with writes that need no user list (a viewer creating
# a viewer, an admin renaming a viewer). Prints p50/p99/max latency and errors. (The same webhook
# called by the real kube-apiserver, with the last-admin list: hack/bench/webhook-apiserver.sh.)
#
# Usage: hack/bench/webhook.sh [SECONDS, default 10; 3 with ICHOR_BENCH_SHORT=1] [RATE, default 200]
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
export WEBHOOK_BENCH_SECONDS="${1:-$(full_or_short 10 3)}"
export WEBHOOK_BENCH_RPS="${2:-200}"

out=$(cargo bench -q -p ichor-controller --manifest-path "$root/Cargo.toml" --bench webhook)
echo "$out"
p50=$(sed -n 's/.*p50 \([0-9.]*\) ms.*/\1/p' <<<"$out")
p99=$(sed -n 's/.*p99 \([0-9.]*\) ms.*/\1/p' <<<"$out")
figure "webhook on loopback at ${WEBHOOK_BENCH_RPS}/s, no list: p99 ms (baseline: its p50)" "$p99" "$p50" "-"
