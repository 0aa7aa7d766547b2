#!/usr/bin/env bash
# The issuer on the Kubernetes store beside the local store, in one run (loopback, release build,
# about two minutes): two `ichor-issuer` processes behind one external URL, on
#  (a) the local store: the same users and state directories (credentials.json, fsync on every
#      write) — the baseline;
#  (b) the kube store: a real kube-apiserver and etcd on loopback (built by hack/kube/build.sh),
#      Ichor installed from its chart, the same 100 users as IchorUsers and one
#      ichor-user-credentials Secret; the issuers authenticated as the chart's issuer
#      ServiceAccount (a TokenRequest token), so they run under the chart's RBAC.
# On each: the refresh load (64 clients, each rotating its own family as fast as it is answered,
# every request alternating between the two issuers) and the mixed load of load.sh (paced
# discovery, JWKS, refresh, WhoAmI and sign-ins, then the same with a login flood).
# Reports p50/p99/errors per load and store, and the kube/local ratio, to
# hack/bench/results/kube-store-<date>.md (printed too).
# Usage: hack/bench/kube-store.sh [seconds per measurement, default 10] [flood loops, default 200]
# (ICHOR_BENCH_SHORT=1: 3 s, 50 loops)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 10 3)}"
flood="${2:-$(full_or_short 200 50)}"
work_prefix=kube-store
# shellcheck source=hack/bench/issuer-common.sh
source hack/bench/issuer-common.sh
cp -a "$work/state" "$work/local-state"

# shellcheck source=hack/bench/kube-plane.sh
source hack/bench/kube-plane.sh

declare -A refresh_out mixed_out
measure() { # store
  echo "==> $1 store: refresh, 64 clients, ${seconds}s"
  refresh_out[$1]=$("$load" refresh --issuer "${urls[0]}" --issuer "${urls[1]}" --ca "$ca" \
    --clients 64 --seconds "$seconds")
  echo "${refresh_out[$1]}"
  echo "==> $1 store: mixed load, ${seconds}s sustained + ${seconds}s with a ${flood}-loop login flood"
  mixed_out[$1]=$("$load" mixed --issuer "${urls[0]}" --issuer "${urls[1]}" \
    --pid "${issuer_pids[0]}" --pid "${issuer_pids[1]}" --ca "$ca" --seconds "$seconds" --flood "$flood")
}

start_issuers local
measure local
stop_issuers

echo "==> starting a control plane with Ichor's chart and the 100 users"
start_plane || { echo "the control plane did not start; its log:" >&2; cat "$work/control-plane.log" >&2; exit 1; }
cat "$work/control-plane.log"
start_issuers kube
measure kube
stop_issuers
stop_plane

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a/b; else print "-" }'; }
# The sustained-phase row of an endpoint in a mixed report: ok errors p50 p99.
row() { awk -F'|' -v e="$1" '$2 ~ "^ "e" " && $4 ~ "sustained" {gsub(/ /,""); print $5, $6, $9, $10}' <<<"$2" | head -1; }

figure "refresh grants/s, kube store (baseline: local store)" "$(field rps "${refresh_out[kube]}")" "$(field rps "${refresh_out[local]}")" "-"
figure "refresh p99 ms, kube store (baseline: local store)" "$(field p99_ms "${refresh_out[kube]}")" "$(field p99_ms "${refresh_out[local]}")" "-"
out="$results_dir/kube-store-$(date -u +%F).md"
{
  echo "# The issuer on the kube store beside the local store, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "Release build, loopback, ${seconds} s per measurement; \`hack/bench/kube-store.sh\` (commit $(git rev-parse --short HEAD))."
  echo "Two \`ichor-issuer\` processes per store, one external URL, requests alternating between them."
  echo "Kube store: a real kube-apiserver and etcd on the same machine (their CPU is in the figures),"
  echo "100 IchorUsers, one \`ichor-user-credentials\` Secret, the chart's issuer ServiceAccount."
  echo
  echo "## Refresh, 64 clients as fast as answered (each its own family)"
  echo
  echo "| store | ok | errors | req/s | p50 ms | p99 ms | max ms |"
  echo "|---|---|---|---|---|---|---|"
  for s in local kube; do
    r="${refresh_out[$s]}"
    echo "| $s | $(field ok "$r") | $(field errors "$r") | $(field rps "$r") | $(field p50_ms "$r") | $(field p99_ms "$r") | $(field max_ms "$r") |"
  done
  echo
  echo "kube/local: req/s $(ratio "$(field rps "${refresh_out[kube]}")" "$(field rps "${refresh_out[local]}")"), p50 $(ratio "$(field p50_ms "${refresh_out[kube]}")" "$(field p50_ms "${refresh_out[local]}")"), p99 $(ratio "$(field p99_ms "${refresh_out[kube]}")" "$(field p99_ms "${refresh_out[local]}")")."
  for s in local kube; do
    grep '^refresh error' <<<"${refresh_out[$s]}" | sed "s/^/- $s: /" || true
  done
  echo
  echo "## Mixed load, sustained phase (paced rates)"
  echo
  echo "| endpoint | local ok/errors | kube ok/errors | local p50/p99 ms | kube p50/p99 ms | p99 kube/local |"
  echo "|---|---|---|---|---|---|"
  for e in discovery jwks refresh whoami sign-in; do
    read -r lo le l50 l99 <<<"$(row "$e" "${mixed_out[local]}")"
    read -r ko ke k50 k99 <<<"$(row "$e" "${mixed_out[kube]}")"
    echo "| $e | $lo/$le | $ko/$ke | $l50/$l99 | $k50/$k99 | $(ratio "$k99" "$l99") |"
  done
  for s in local kube; do
    echo
    echo "## The whole mixed report, $s store"
    echo
    sed 's/^# /### /; s/^## /### /' <<<"${mixed_out[$s]}"
  done
  for f in "$work"/issuer-*.log; do
    if [ -s "$f" ]; then
      echo
      echo "$(basename "$f") (last lines, warnings and up):"
      echo '```'
      tail -n 5 "$f"
      echo '```'
    fi
  done
} >"$out"
cat "$out"
