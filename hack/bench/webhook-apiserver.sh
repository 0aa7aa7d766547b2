#!/usr/bin/env bash
# The IchorUser admission webhook called by the real kube-apiserver of the test kit's control plane
# (reconcilers/benches/webhook_apiserver.rs): dry-run writes at a paced RATE for SECONDS per phase,
# 1,000 IchorUsers in the namespace; phases: a rename through the webhook (no list), an admin
# disabled through the webhook (the last-admin check lists every user), and the rename with the
# webhook configuration removed (the apiserver alone, the baseline). Writes
# hack/bench/results/webhook-apiserver.md (printed too).
# Usage: hack/bench/webhook-apiserver.sh [SECONDS, default 10; 3 with ICHOR_BENCH_SHORT=1] [RATE, default 200] [USERS, default 1000]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
export ICHOR_BUILD_DIR="${ICHOR_BUILD_DIR:-$PWD/.build}"
export WEBHOOK_BENCH_SECONDS="${1:-$(full_or_short 10 3)}"
export WEBHOOK_BENCH_RPS="${2:-200}"
export WEBHOOK_BENCH_USERS="${3:-1000}"

if [[ -x "${ICHOR_BENCH_BIN_DIR:-}/webhook_apiserver" ]]; then
  # A prebuilt bench binary (cargo bench --no-run), with the ichor-controller it was built with
  # copied beside it (else the one in the target directory, which another build may replace).
  if [[ -x "$ICHOR_BENCH_BIN_DIR/ichor-controller" ]]; then
    export ICHOR_CONTROLLER_BIN="$ICHOR_BENCH_BIN_DIR/ichor-controller"
  fi
  out=$("$ICHOR_BENCH_BIN_DIR/webhook_apiserver")
else
  out=$(cargo bench -q -p ichor-controller --bench webhook_apiserver)
fi
echo "$out"
field() { grep "phase=$1 " <<<"$out" | sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" | head -1; }
for p in no-webhook webhook-no-list webhook-last-admin-list; do
  for f in ok errors achieved_rps p50_ms p99_ms max_ms; do declare "${p//-/_}_$f=$(field "$p" "$f")"; done
done
figure "webhook via apiserver at ${WEBHOOK_BENCH_RPS}/s, rename (no list): p99 ms (baseline: apiserver without webhook)" \
  "$webhook_no_list_p99_ms" "$no_webhook_p99_ms" "-"
figure "webhook via apiserver at ${WEBHOOK_BENCH_RPS}/s, last-admin list of $WEBHOOK_BENCH_USERS users: p99 ms (baseline: apiserver without webhook)" \
  "$webhook_last_admin_list_p99_ms" "$no_webhook_p99_ms" "-"
figure "webhook via apiserver, last-admin list: achieved req/s (baseline: offered)" \
  "$webhook_last_admin_list_achieved_rps" "$WEBHOOK_BENCH_RPS" ">= 0.95"
figure "webhook via apiserver, last-admin list: failed or refused requests (baseline: sent)" \
  "$webhook_last_admin_list_errors" "$((WEBHOOK_BENCH_SECONDS * WEBHOOK_BENCH_RPS))" "0"
figure "apiserver without webhook: achieved req/s (baseline: offered)" \
  "$no_webhook_achieved_rps" "$WEBHOOK_BENCH_RPS" ">= 0.95"

report="$results_dir/webhook-apiserver.md"
{
  echo "# The IchorUser webhook through the real kube-apiserver, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); shared with other builds."
  echo "\`hack/bench/webhook-apiserver.sh\` (commit $(git rev-parse --short HEAD)): kube-apiserver, etcd and one"
  echo "\`ichor-controller\` replica on the same cores; dry-run merge patches as an impersonated admin, paced"
  echo "${WEBHOOK_BENCH_RPS}/s for ${WEBHOOK_BENCH_SECONDS} s per phase (open loop), $WEBHOOK_BENCH_USERS IchorUsers + 2 admins in the namespace."
  echo
  echo "| phase | ok | errors | achieved req/s | p50 ms | p99 ms | max ms | p99 / no webhook |"
  echo "|---|---|---|---|---|---|---|---|"
  for p in no-webhook webhook-no-list webhook-last-admin-list; do
    v="${p//-/_}"
    p99v="${v}_p99_ms"; ok="${v}_ok"; er="${v}_errors"; ach="${v}_achieved_rps"; p50v="${v}_p50_ms"; mx="${v}_max_ms"
    echo "| $p | ${!ok} | ${!er} | ${!ach} | ${!p50v} | ${!p99v} | ${!mx} | $(awk -v a="${!p99v}" -v b="$no_webhook_p99_ms" 'BEGIN {printf "%.2f", a / b}') |"
  done
  echo
  echo "p50/p99 are of the requests answered with success; a phase whose requests all failed shows 0."
  grep "first error" <<<"$out" | sed 's/^/- /' || true
} >"$report"
cat "$report"
