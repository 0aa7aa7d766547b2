#!/usr/bin/env bash
# One address, many people (loopback, release build, bounded: the sign-ins, then N seconds of
# refreshes, then a few seconds of garbage): USERS users sign in from one forwarded address (an
# office's NAT), each with one refresh family, and every family refreshes once every PERIOD
# seconds, staggered (USERS/PERIOD a second in all, far over the one a second the per-source bucket
# used to pass for every request); then the same address sends 100 garbage refresh tokens and 20
# wrong passwords. Claims: zero valid refreshes refused; the garbage and the guesses slowed down
# after the failure bursts (60 and 10). Reports the counts and p50/p99 of the refreshes to
# hack/bench/results/nat.md (printed too); exits non-zero when a valid refresh was refused.
# Usage: hack/bench/nat.sh [seconds, default 60] [users, default 500] [period, default 10]
# (ICHOR_BENCH_SHORT=1: 15 s, 200 users)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 60 15)}"
users="${2:-$(full_or_short 500 200)}"
period="${3:-10}"
work_prefix=nat
bench_users="$users"
# shellcheck source=hack/bench/issuer-common.sh
source hack/bench/issuer-common.sh

read -r ext int <<<"$(free_ports 2)"
url="https://127.0.0.1:$ext"
RUST_LOG=warn ICHOR_ISSUER_METRICS_LISTEN=127.0.0.1:0 "$bin" --external-url "$url" --listen "127.0.0.1:$ext" \
  --internal-listen "127.0.0.1:$int" \
  --ichor-tls-dir "$work/tls" --keys-file "$work/keys.json" --trusted-proxy 127.0.0.0/8 \
  --store local --local-users-dir "$work/users" --local-state-dir "$work/state" \
  2>>"$work/issuer.log" &
pids+=("$!")
for _ in $(seq 1 200); do
  curl -fsS --cacert "$ca" "$url/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fsS --cacert "$ca" "$url/readyz" >/dev/null || { cat "$work/issuer.log" >&2; exit 1; }

echo "==> $users users behind one address, each family refreshing every ${period}s for ${seconds}s"
report=$("$load" nat --issuer "$url" --ca "$ca" --users "$users" --period "$period" --seconds "$seconds")
refused=$(sed -n 's/^nat refused_valid=\([0-9]*\) .*/\1/p' <<<"$report")
garbage_refused=$(sed -n 's/.* garbage_refused=\([0-9]*\)$/\1/p' <<<"$report")
verdict="holds"; { [ "$refused" = 0 ] && [ "${garbage_refused:-0}" -gt 0 ]; } || verdict="BROKEN"

figure "valid refreshes refused behind one address (baseline: none)" "$refused" "-" "0"
figure "garbage refresh tokens refused after the burst (of 100)" "${garbage_refused:-?}" "100" "> 0"
out="$results_dir/nat.md"
{
  echo "# One address, many people, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "Release build, loopback, one \`ichor-issuer --store local\` (fsync on every write);"
  echo "\`hack/bench/nat.sh $seconds $users $period\` (commit $(git rev-parse --short HEAD)). Every request carries"
  echo "the same X-Forwarded-For address."
  echo
  echo "Valid refreshes refused: **$refused** (claim: 0); garbage refresh tokens refused after the"
  echo "burst: **${garbage_refused:-?}** (claim: more than 0) — $verdict."
  echo
  grep -v '^nat refused_valid=' <<<"$report"
  if [ -s "$work/issuer.log" ]; then
    echo
    echo "Issuer log (last lines, warnings and up):"
    echo '```'
    tail -n 5 "$work/issuer.log"
    echo '```'
  fi
} >"$out"
echo
cat "$out"
echo "written: $out"
[ "$verdict" = holds ]
