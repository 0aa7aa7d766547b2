#!/usr/bin/env bash
# Mixed load against two issuer processes sharing one local store (loopback only, release build,
# bounded: two phases of N seconds, about half a minute in all):
#  (1) sustained: paced discovery, JWKS, refresh grants, UserService/WhoAmI over gRPC-web (with
#      ichor-ui ID tokens) and full sign-ins, every request alternating between the two issuers;
#  (2) flood: the same paced workload plus 200 loops signing in as fast as they are answered, at
#      most 5 attempts/s each (~1,000/s offered, ~75 times what the argon2 permits serve; a
#      third guessing passwords, none waiting out a 503), to show the argon2 semaphore, its bounded
#      queue (sign-ins past it shed at once with 503 + Retry-After, counted apart from errors) and
#      the per-user back-off holding memory and CPU while the other endpoints keep their p99
#      (bound: peak RSS under 400 MiB).
# In both phases six known devices (users who signed in once before, sending the device cookie
# the issuer set then) sign in every 3 s each; the report gives their successes, shed count and
# p99 beside the flood's shed count (goal: none shed, p99 under 2 s during the flood). The same
# report is also written to hack/bench/results/load-devices.md.
# Both issuers use the same --local-users-dir, --local-state-dir, keys.json and TLS directory.
# Reports throughput and p50/p99/p999 per endpoint and phase, and each issuer's VmHWM, to
# hack/bench/results/load.md (printed too).
# Usage: hack/bench/load.sh [seconds per phase, default 10] [flood loops, default 200]
# (ICHOR_BENCH_SHORT=1: 4 s per phase, 100 loops)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 10 4)}"
flood="${2:-$(full_or_short 200 100)}"
work_prefix=load
# shellcheck source=hack/bench/issuer-common.sh
source hack/bench/issuer-common.sh

# Two replicas of one issuer: the same external URL (the `iss` of every token; in a cluster the
# Service in front of both), each listening on its own port, which the load generator addresses.
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
base=("$(vm "${pids[0]}" VmRSS)" "$(vm "${pids[1]}" VmRSS)")

echo "==> mixed load, ${seconds}s sustained + ${seconds}s with a ${flood}-loop login flood"
report=$("$load" mixed --issuer "${urls[0]}" --issuer "${urls[1]}" --pid "${pids[0]}" --pid "${pids[1]}" \
  --ca "$ca" --seconds "$seconds" --flood "$flood")
peak=$(( $(vm "${pids[0]}" VmHWM) > $(vm "${pids[1]}" VmHWM) ? $(vm "${pids[0]}" VmHWM) : $(vm "${pids[1]}" VmHWM) ))
verdict="holds"; [ "$peak" -lt 400 ] || verdict="BROKEN"

figure "peak RSS MiB of two issuers under a ${flood}-loop login flood (baseline: RSS after start)" "$peak" "${base[0]}" "< 400 MiB"
out="$results_dir/load.md"
{
  echo "# Mixed load on two issuers sharing a local store, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "Release build, loopback, ${seconds} s per phase; \`hack/bench/load.sh\` (commit $(git rev-parse --short HEAD))."
  echo "Two \`ichor-issuer --store local\` processes on the same users, state (credentials.json, fsync"
  echo "on every write), keys.json and TLS directories; RSS after start: ${base[0]} and ${base[1]} MiB."
  echo
  echo "Peak RSS of either issuer over both phases: **$peak MiB** (bound: under 400 MiB; $verdict)."
  echo
  echo "$report"
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
devices_out="$results_dir/load-devices.md"
{
  echo "# Known devices during a login flood, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "\`hack/bench/load.sh $seconds $flood\` (commit $(git rev-parse --short HEAD)): two issuers on one local store, ${seconds} s"
  echo "sustained, then ${seconds} s with ${flood} sign-in loops flooding the shared argon2id queue; the full report is $out."
  echo
  sed -n '/^## Known devices/,$p' <<<"$report"
  echo
  sed -n '/^## Flood outcomes/,/^$/p' <<<"$report"
  sed -n '/^| outcome/,/^$/p' <<<"$report"
  echo "The paced sign-ins of users without a device cookie, from the full report:"
  echo
  grep -E '^\| endpoint \| target|^(\|---){11}\|$|^\| sign-in' <<<"$report"
} >"$devices_out"
echo
cat "$out"
echo "written: $out and $devices_out"
