#!/usr/bin/env bash
# Cost of one request from a new source when the per-source bucket table is full (65,536 sources,
# each with a failure, every request evicting one), as a ratio to the same request on an empty
# table, and the same for a sign-in of a new name against the full per-user back-off table; the
# previous eviction (a retain and a scan of the whole table per request) beside them for scale.
# Eviction is O(1) amortised when the ratio stays a small constant. Criterion, release build.
# Writes hack/bench/results/limits.md (printed too).
# Usage: hack/bench/limits.sh   (ICHOR_BENCH_SHORT=1: 1 s warm-up, 2 s per measurement)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
target="${CARGO_TARGET_DIR:-$PWD/target}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
quick=()
bench_short && quick=(--warm-up-time 1 --measurement-time 2)
cargo bench -q -p ichor-issuer --bench limits -- --noplot "${quick[@]}" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
ns() { python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["mean"]["point_estimate"])' \
  "$target/criterion/$1/$2/new/estimates.json"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
s_empty=$(ns failure_from_a_new_source empty_table)
s_full=$(ns failure_from_a_new_source full_table)
s_small=$(ns failure_from_a_new_source full_table_of_1024)
s_scan=$(ns failure_from_a_new_source full_table_previous_scan)
u_empty=$(ns sign_in_of_a_new_name empty_table)
u_full=$(ns sign_in_of_a_new_name full_table)
figure "a failure from a new source, ns, bucket table of 65,536 (baseline: empty table)" "$s_full" "$s_empty" "a small constant"
figure "a failed sign-in of a new name, ns, back-off table of 65,536 (baseline: empty table)" "$u_full" "$u_empty" "a small constant"
out="$results_dir/limits.md"
{
  echo "# Per-source and per-user tables when full, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "Criterion means, release build; \`hack/bench/limits.sh\` (commit $(git rev-parse --short HEAD))."
  echo
  echo "| request | empty table | full table | full / empty |"
  echo "|---|---|---|---|"
  echo "| a failure from a new source (bucket table of 65,536) | $s_empty ns | $s_full ns | $(ratio "$s_full" "$s_empty") |"
  echo "| a failure from a new source (bucket table of 1,024) | $s_empty ns | $s_small ns | $(ratio "$s_small" "$s_empty") |"
  echo "| the same with the previous eviction (retain + scan) | $s_empty ns | $s_scan ns | $(ratio "$s_scan" "$s_empty") |"
  echo "| a failed sign-in of a new name (back-off table of 65,536) | $u_empty ns | $u_full ns | $(ratio "$u_full" "$u_empty") |"
  echo
  echo "The empty-table figures start each request on a new table, so they include its first"
  echo "allocation; the full-table ones evict the least recently used entry on every request. What"
  echo "remains between full and empty is the memory of a large table (cache misses), not its length."
} >"$out"
cat "$out"
echo "written: $out"
