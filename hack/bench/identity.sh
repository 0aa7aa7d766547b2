#!/usr/bin/env bash
# Replay of the identity graph on generated journals (1,000 IchorUsers, 50 TalosClusters, 150
# control planes): events/s and peak RSS of `ichor-controller replay --summary` at 100,000 and
# 1,000,000 events, each journal generated once (kept in /tmp, keyed by its size). The 1M figures
# are set against the 100k run of the same invocation: a flat curve keeps events/s (ratio near 1)
# and a peak RSS that does not grow with the journal (the replay streams it).
# Writes hack/bench/results/replay-<date>.md (printed too).
# Usage: hack/bench/identity.sh   (ICHOR_BENCH_SHORT=1: 100k only, against a 20k journal)
# With ICHOR_BENCH_BIN_DIR set, its ichor-controller is used instead of a build.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
if [[ -n "${ICHOR_BENCH_BIN_DIR:-}" ]]; then
  bin="$ICHOR_BENCH_BIN_DIR/ichor-controller"
else
  cargo build --quiet --release -p ichor-reconcilers --bin ichor-controller
  bin="${CARGO_TARGET_DIR:-target}/release/ichor-controller"
fi
sizes=(100000 1000000)
bench_short && sizes=(20000 100000)

declare -A rate rss secs
for n in "${sizes[@]}"; do
  journal="/tmp/ichor-identity-$n.jsonl"
  [ -s "$journal" ] || "$bin" gen-journal --users 1000 --clusters 50 --machines 150 --events "$n" "$journal" 2>/dev/null
  out=$( { /usr/bin/time -f 'wall=%e rss_kb=%M' "$bin" replay --summary "$journal" >/dev/null; } 2>&1 | tail -1)
  secs[$n]=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' <<<"$out")
  rss[$n]=$(sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' <<<"$out" | awk '{printf "%.1f", $1 / 1024}')
  rate[$n]=$(awk -v n="$n" -v s="${secs[$n]}" 'BEGIN {printf "%.0f", n / s}')
  echo "replay $n events: ${secs[$n]} s, ${rate[$n]} events/s, peak RSS ${rss[$n]} MiB"
done
small=${sizes[0]}; large=${sizes[1]}
figure "replay events/s at $large events (baseline: $small events)" "${rate[$large]}" "${rate[$small]}" ">= 0.5 (flat within 2x)"
figure "replay peak RSS MiB at $large events (baseline: $small events)" "${rss[$large]}" "${rss[$small]}" "<= 2.0"

out="$results_dir/replay-$(date -u +%F).md"
{
  echo "# Replay of generated journals, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); shared with other builds."
  echo "\`ichor-controller replay --summary\`, release build, journals in the page cache; \`hack/bench/identity.sh\` (commit $(git rev-parse --short HEAD))."
  echo "1,000 IchorUsers, 50 TalosClusters, 150 control planes under churn."
  echo
  echo "| events | wall s | events/s | peak RSS MiB | events/s / the $small run | RSS / the $small run |"
  echo "|---|---|---|---|---|---|"
  for n in "${sizes[@]}"; do
    echo "| $n | ${secs[$n]} | ${rate[$n]} | ${rss[$n]} | $(awk -v a="${rate[$n]}" -v b="${rate[$small]}" 'BEGIN {printf "%.2f", a / b}') | $(awk -v a="${rss[$n]}" -v b="${rss[$small]}" 'BEGIN {printf "%.2f", a / b}') |"
  done
} >"$out"
cat "$out"
