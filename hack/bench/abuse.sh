#!/usr/bin/env bash
# Abuse bounds, measured: the release issuer (local store, default ServeOptions) idle, then under
# each unauthenticated abuse vector in turn from hack/bench/abuse-attack.py (every connection
# reopened as soon as the server drops it), for a fixed time each, loopback only:
#   RSS at the end and at its peak, CPU (percent of one core) of the issuer process, and a probe
#   (GET /oidc/jwks on a fresh connection every 0.5 s) answered or not, with its slowest time.
# Bounded: about (vectors + 1) x (seconds + 3) s plus the build. The table goes to
# hack/bench/results/abuse.md (printed too).
# Usage: hack/bench/abuse.sh [seconds per vector, default 15] [connections, default 2000]
# (ICHOR_BENCH_SHORT=1: 3 s per vector, 500 connections)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 15 3)}"
conns="${2:-$(full_or_short 2000 500)}"
work_prefix=abuse
# shellcheck source=hack/bench/issuer-common.sh
source hack/bench/issuer-common.sh
attack=hack/bench/abuse-attack.py

read -r ext int <<<"$(free_ports 2)"
url="https://127.0.0.1:$ext"
RUST_LOG=warn ICHOR_ISSUER_METRICS_LISTEN=127.0.0.1:0 "$bin" --external-url "$url" --listen "127.0.0.1:$ext" \
  --internal-listen "127.0.0.1:$int" --ichor-tls-dir "$work/tls" --keys-file "$work/keys.json" \
  --store local --local-users-dir "$work/users" --local-state-dir "$work/state" 2>>"$work/issuer.log" &
pid=$!
pids+=("$pid")
for _ in $(seq 1 200); do
  curl -fsS --cacert "$ca" "$url/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fsS --cacert "$ca" "$url/readyz" >/dev/null

rss() { awk '/^VmRSS:/ {print int($2/1024)}' "/proc/$pid/status"; }       # MiB
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }                     # utime + stime
hz=$(getconf CLK_TCK)

rows=()
idle_rss=""; worst_peak=0; worst_slowest=0
# measure NAME LISTENER-PORT VECTOR|"" : runs the vector (or nothing) for $seconds while sampling.
measure() {
  local name=$1 port=$2 vector=$3 t0 c0 peak now ok=0 bad=0 slowest=0 out="" attacker=""
  t0=$(date +%s.%N); c0=$(ticks); peak=$(rss)
  if [[ -n "$vector" ]]; then
    python3 "$attack" "$vector" 127.0.0.1 "$port" "$conns" "$seconds" >"$work/attack.out" 2>>"$work/attack.err" &
    attacker=$!
    pids+=("$attacker")
  fi
  local end=$(( $(date +%s) + seconds ))
  while (( $(date +%s) < end )); do
    local probe
    probe=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --cacert "$ca" --max-time 5 "$url/oidc/jwks" || true)
    if [[ "${probe%% *}" == 200 ]]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    slowest=$(awk -v a="$slowest" -v b="${probe##* }" 'BEGIN {print (b > a ? b : a)}')
    now=$(rss); (( now > peak )) && peak=$now
    sleep 0.5
  done
  [[ -n "$attacker" ]] && { wait "$attacker" || true; out=$(cat "$work/attack.out"); }
  local cpu
  cpu=$(awk -v c0="$c0" -v c1="$(ticks)" -v t0="$t0" -v t1="$(date +%s.%N)" -v hz="$hz" \
    'BEGIN {printf "%.0f", 100 * (c1 - c0) / hz / (t1 - t0)}')
  [[ -n "$idle_rss" ]] || idle_rss=$(rss)
  (( peak > worst_peak )) && worst_peak=$peak
  worst_slowest=$(awk -v a="$worst_slowest" -v b="$slowest" 'BEGIN {print (b > a ? b : a)}')
  rows+=("| $name | $(rss) | $peak | $cpu % | $ok / $((ok + bad)) | ${slowest} s | ${out:-} |")
  echo "${rows[-1]}"
  sleep 3   # the dropped connections' memory returns before the next vector
}

measure "idle (no attack)" "$ext" ""
measure "idle connections, no request (h2 ALPN)" "$ext" idle
measure "slowloris headers, 1 line/s" "$ext" slowloris
measure "slowloris headers on the internal listener" "$int" slowloris
measure "slow body to /oidc/token, 1 byte/s" "$ext" slow-body
measure "h2: 100 streams/conn, token bodies 1 byte short" "$ext" h2-streams
measure "h2: 100 streams/conn, window never opened" "$ext" window-zero
measure "h2: 8 streams/conn (the cap), window never opened" "$ext" window-zero-cap
measure "h2 rapid reset (HEADERS+RST_STREAM)" "$ext" rapid-reset
measure "h2 PING flood, never reading" "$ext" ping-flood
measure "h2 CONTINUATION flood" "$ext" continuation
measure "idle again (after the attacks)" "$ext" ""

figure "abuse: highest peak RSS MiB over every vector (baseline: idle RSS)" "$worst_peak" "$idle_rss" "bounded"
figure "abuse: slowest probe s under any vector (baseline: none)" "$worst_slowest" "-" "answered"
out="$results_dir/abuse.md"
{
  echo "# Abuse bounds, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "Release issuer, default \`ServeOptions\`, local store; \`hack/bench/abuse.sh $seconds $conns\` (commit $(git rev-parse --short HEAD))."
  echo "Each vector runs ${seconds} s from ${conns} attacking connections (Python asyncio on the same 2 cores),"
  echo "each reopened as soon as the issuer drops it. CPU is the issuer's, in percent of one core over the vector."
  echo "The probe is GET /oidc/jwks on a fresh TLS connection every 0.5 s (answered / sent, slowest)."
  echo
  echo "| vector | RSS at end (MiB) | peak RSS (MiB) | issuer CPU | probe answered | slowest probe | attacker |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out"
echo
cat "$out"
echo "written: $out"
