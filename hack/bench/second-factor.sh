#!/usr/bin/env bash
# Sign-in latency with a second factor beside the password alone, on one issuer (local store,
# loopback, release build): full sign-ins (authorize, password, code exchange) of distinct users
# started at a steady rate, first by users with the password alone, then by users with an
# authenticator app who answer the second step (POST /oidc/login/factor with the code the load
# generator computes). Each sign-in takes a user of its own, so no code is used twice and no
# user's back-off is shared. The rate stays below what the argon2id permits serve, so what is
# measured is the sign-in, not a queue. Reports p50/p99 of both and their ratio to
# hack/bench/results/second-factor.md (printed too).
# Usage: hack/bench/second-factor.sh [seconds per phase, default 20; 6 with ICHOR_BENCH_SHORT=1]
#        [sign-ins per second, default 4]
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 20 6)}"
rate="${2:-4}"
# One user per sign-in in each phase: the first ones have the authenticator app, then the
# password-only ones, then those of a 2 s warm-up (not measured).
per_phase=$((seconds * rate))
bench_users=$((2 * per_phase + 2 * rate))
bench_factors=$per_phase
work_prefix=second-factor
# shellcheck source=hack/bench/issuer-common.sh
source hack/bench/issuer-common.sh

read -r ext int <<<"$(free_ports 2)"
url="https://127.0.0.1:$ext"
RUST_LOG=warn "$bin" --external-url "$url" --listen "127.0.0.1:$ext" --internal-listen "127.0.0.1:$int" \
  --ichor-tls-dir "$work/tls" --keys-file "$work/keys.json" --trusted-proxy 127.0.0.0/8 \
  --store local --local-users-dir "$work/users" --local-state-dir "$work/state" \
  2>>"$work/issuer.log" &
pids+=("$!")
for _ in $(seq 1 200); do
  curl -fsS --cacert "$ca" "$url/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fsS --cacert "$ca" "$url/readyz" >/dev/null || { echo "the issuer did not become ready:" >&2; cat "$work/issuer.log" >&2; exit 1; }

"$load" sign-ins --issuer "$url" --ca "$ca" --first-user $((2 * per_phase)) --rate "$rate" --seconds 2 >/dev/null
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
echo "==> ${seconds}s of sign-ins at ${rate}/s, the password alone"
password=$("$load" sign-ins --issuer "$url" --ca "$ca" --first-user "$per_phase" --rate "$rate" --seconds "$seconds")
echo "$password"
echo "==> ${seconds}s of sign-ins at ${rate}/s, the password and an authenticator code"
factor=$("$load" sign-ins --issuer "$url" --ca "$ca" --first-user 0 --rate "$rate" --seconds "$seconds" --factor)
echo "$factor"
for r in "$password" "$factor"; do
  if [[ "$(field ok "$r")" != "$(field count "$r")" ]]; then
    echo "some sign-ins failed; the issuer's log:" >&2
    tail -n 20 "$work/issuer.log" >&2
    exit 1
  fi
done

pp50=$(field p50_ms "$password"); pp99=$(field p99_ms "$password")
fp50=$(field p50_ms "$factor"); fp99=$(field p99_ms "$factor")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
goal="< 1.5 x (one more request and one entry write, no argon2id)"
figure "sign-in p99 ms with an authenticator code (baseline: the password alone)" "$fp99" "$pp99" "$goal"
out="$results_dir/second-factor.md"
{
  echo "# Sign-in with a second factor beside the password alone, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "Release build, loopback, one issuer on the local store; \`hack/bench/second-factor.sh\` (commit $(git rev-parse --short HEAD)${ICHOR_BENCH_BIN_DIR:+, binaries from $ICHOR_BENCH_BIN_DIR})."
  echo "${rate} full sign-ins started per second for ${seconds} s in each phase, each by a user of its own"
  echo "(authorize, password, [authenticator code,] code exchange; timed from the authorize request to the tokens),"
  echo "after a 2 s warm-up of password-only sign-ins that is not measured."
  echo
  echo "| sign-in | count | p50 ms | p99 ms | p99 / password alone | goal |"
  echo "|---|---|---|---|---|---|"
  echo "| the password alone | $(field ok "$password") | $pp50 | $pp99 | 1.00 | |"
  echo "| the password and an authenticator code | $(field ok "$factor") | $fp50 | $fp99 | $(ratio "$fp99" "$pp99") | $goal |"
} >"$out"
cat "$out"
