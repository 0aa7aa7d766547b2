#!/usr/bin/env bash
# Replay throughput and peak memory of the identity graph on a generated journal:
# 1,000 IchorUsers, 50 TalosClusters, 150 control planes, 100,000 events.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p ichor-reconcilers --bin ichor-controller
bin="${CARGO_TARGET_DIR:-target}/release/ichor-controller"
journal="${1:-/tmp/ichor-identity-100k.jsonl}"
[ -f "$journal" ] || "$bin" gen-journal --users 1000 --clusters 50 --machines 150 --events 100000 "$journal"
/usr/bin/time -v "$bin" replay --summary --profile "$journal" 2>&1 \
  | grep -E 'events|recomputed|Maximum resident|Elapsed'
