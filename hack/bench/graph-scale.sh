#!/usr/bin/env bash
# The identity graph's cost per event as the installation grows: one IchorUser change and one
# TalosCluster change folded and evaluated (criterion, release build, `reconcilers/benches/scale.rs`)
# at 1,000, 10,000 and 50,000 IchorUsers with 50 clusters, and 1,000 and 10,000 with 500 clusters
# (three control planes per cluster). Each figure is set against 1,000 users and 50 clusters in the
# same run; the goal is a flat curve: within 2x from 1,000 to 10,000 users.
# Writes hack/bench/results/graph-scale.md (printed too).
# Usage: hack/bench/graph-scale.sh   (ICHOR_BENCH_SHORT=1: 1,000 and 10,000 users, 50 clusters)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
target="${CARGO_TARGET_DIR:-$PWD/target}"
sizes=$(full_or_short "1000x50,10000x50,50000x50,1000x500,10000x500" "1000x50,10000x50")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [[ -x "${ICHOR_BENCH_BIN_DIR:-}/scale" ]]; then
  # A prebuilt bench binary (cargo bench --no-run); criterion writes under $CARGO_TARGET_DIR.
  CARGO_TARGET_DIR="$target" ICHOR_SCALE_SIZES="$sizes" "$ICHOR_BENCH_BIN_DIR/scale" --bench --noplot >"$log" 2>&1 \
    || { cat "$log" >&2; exit 1; }
else
  ICHOR_SCALE_SIZES="$sizes" cargo bench -q -p ichor-controller --bench scale -- --noplot >"$log" 2>&1 \
    || { cat "$log" >&2; exit 1; }
fi
us() { # change size -> criterion mean in µs
  python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["mean"]["point_estimate"] / 1000))' \
    "$target/criterion/scale/$1/$2/new/estimates.json"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
base="1000x50"
declare -A t
rows=""
for size in ${sizes//,/ }; do
  for change in "user change" "cluster change"; do t["$change/$size"]=$(us "$change" "$size"); done
  rows+="| ${size%x*} | ${size#*x} | ${t[user change/$size]} | $(ratio "${t[user change/$size]}" "${t[user change/$base]}") | ${t[cluster change/$size]} | $(ratio "${t[cluster change/$size]}" "${t[cluster change/$base]}") |"$'\n'
done
for size in ${sizes//,/ }; do
  [[ "$size" == "$base" ]] && continue
  goal="-"; [[ "$size" == 10000x50 ]] && goal="<= 2.0"
  figure "graph: one user change at ${size%x*} users, ${size#*x} clusters, µs (baseline: 1,000 users, 50 clusters)" "${t[user change/$size]}" "${t[user change/$base]}" "$goal"
  figure "graph: one cluster change at ${size%x*} users, ${size#*x} clusters, µs (baseline: 1,000 users, 50 clusters)" "${t[cluster change/$size]}" "${t[cluster change/$base]}" "$goal"
done
out="$results_dir/graph-scale.md"
{
  echo "# The identity graph's cost per event by installation size, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); shared with other builds."
  echo "Criterion means (fold one changed object, evaluate), release build, mimalloc as in the controller;"
  echo "\`hack/bench/graph-scale.sh\` (commit $(git rev-parse --short HEAD)). Ratios are to 1,000 users and 50 clusters in the same run."
  echo
  echo "| users | clusters | one user change µs | / 1k x 50 | one cluster change µs | / 1k x 50 |"
  echo "|---|---|---|---|---|---|"
  printf '%s' "$rows"
} >"$out"
cat "$out"
