#!/usr/bin/env bash
# One busy user against many users with one session each (loopback only, release build, bounded:
# four loads of N seconds, about a minute in all), on the local store:
#  (1) one issuer process: 32 users with one refresh family each, then one user with 32
#      families, every session rotating its family as fast as it is answered and retrying at once
#      with the same token on a 503; after each load every session's last token is presented
#      once more (a session whose token no longer works is lost);
#  (2) the same on two issuer processes sharing the store (requests alternating between them),
#      where one user's changes can still conflict across processes and are retried.
# Expected: no 503 and no lost session in any load; grants/s of the busy user beside the spread
# load's, as a ratio measured in the same run.
# The tables go to hack/bench/results/user-queue.md (printed too).
# Usage: hack/bench/user-queue.sh [seconds per load, default 10] [sessions, default 32]
# (ICHOR_BENCH_SHORT=1: 3 s per load)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 10 3)}"
sessions="${2:-32}"
work_prefix=user-queue
# shellcheck source=hack/bench/issuer-common.sh
source hack/bench/issuer-common.sh

urls=()
external=""
start_issuer() { # n
  local ext int url
  read -r ext int <<<"$(free_ports 2)"
  url="https://127.0.0.1:$ext"
  external="${external:-$url}"
  RUST_LOG=warn ICHOR_ISSUER_METRICS_LISTEN=127.0.0.1:0 "$bin" --external-url "$external" --listen "127.0.0.1:$ext" \
    --internal-listen "127.0.0.1:$int" \
    --ichor-tls-dir "$work/tls" --keys-file "$work/keys.json" --trusted-proxy 127.0.0.0/8 --family-writes-per-minute 0 \
    --store local --local-users-dir "$work/users" --local-state-dir "$work/state" \
    2>>"$work/issuer-$1.log" &
  pids+=("$!")
  urls+=("$url")
  for _ in $(seq 1 200); do
    curl -fsS --cacert "$ca" "$url/readyz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "issuer $1 did not become ready; its log:" >&2
  cat "$work/issuer-$1.log" >&2
  exit 1
}
start_issuer 1
start_issuer 2

echo "==> one issuer: $sessions users x 1 session, then 1 user x $sessions sessions, ${seconds}s each"
one=$("$load" busy-user --issuer "${urls[0]}" --ca "$ca" --sessions "$sessions" --first-user 0 --seconds "$seconds")
echo "$one"
echo "==> two issuers on one store: the same"
two=$("$load" busy-user --issuer "${urls[0]}" --issuer "${urls[1]}" --ca "$ca" --sessions "$sessions" \
  --first-user $((sessions + 1)) --seconds "$seconds")
echo "$two"

# grants/s of a table row: the second column of the row whose first starts with $1.
grants() { awk -F'|' -v r="$1" 'index($2, " " r) == 1 {gsub(/ /, "", $3); print $3; exit}' <<<"$2"; }
figure "grants/s, 1 user x $sessions sessions, one issuer (baseline: $sessions users x 1 session)" \
  "$(grants "1 user" "$one")" "$(grants "$sessions users" "$one")" "-"
figure "grants/s, 1 user x $sessions sessions, two issuers (baseline: $sessions users x 1 session)" \
  "$(grants "1 user" "$two")" "$(grants "$sessions users" "$two")" "-"
out="$results_dir/user-queue.md"
{
  echo "# One busy user beside many users, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "Release build, loopback, ${seconds} s per load; \`hack/bench/user-queue.sh\` (commit $(git rev-parse --short HEAD))."
  echo "Store: local files (credentials.json, fsync on every write) in $(df -P "$work" | awk 'NR==2 {print $1}')."
  echo "Every session rotates its own refresh family as fast as it is answered and retries a 503 at once"
  echo "with the same token; \"sessions lost\" counts the sessions whose last token no longer refreshed."
  echo
  echo "## One issuer process"
  echo
  echo "$one"
  echo
  echo "## Two issuer processes on one store"
  echo
  echo "$two"
  for n in 1 2; do
    if [ -s "$work/issuer-$n.log" ]; then
      echo
      echo "Issuer $n log (last lines, warnings and up):"
      echo '```'
      tail -n 5 "$work/issuer-$n.log"
      echo '```'
    fi
  done
} >"$out"
echo
cat "$out"
echo "written: $out"
