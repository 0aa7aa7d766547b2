#!/usr/bin/env bash
# The issuer on the Kubernetes store beside the local store, over a curve of user counts (loopback,
# release build): at each count N (default 100, 1,000, 3,000 and 10,000), `issuer_load setup`
# seeds N users with three refresh families each (as if each had signed in three times), then two
# `ichor-issuer` processes behind one external URL run on
#  (a) the local store: the same users and state directories (credentials.json, fsync on every
#      write) — the baseline;
#  (b) the kube store: a fresh real kube-apiserver and etcd on loopback (built by
#      hack/kube/build.sh), Ichor installed from its chart, the N users as IchorUsers and their
#      credentials one Secret per user in ichor-credentials (a fresh installation's layout;
#      hack/bench/kube-secret.sh measures the legacy one Secret); the issuers authenticated as the chart's issuer
#      ServiceAccount (a TokenRequest token), so they run under the chart's RBAC.
# On each: the refresh load (64 clients rotating all the seeded families, dealt to them in turn,
# as fast as answered, every request alternating between the two issuers). On the kube store,
# etcd's own counters are read from its /metrics before and after the load:
#  etcd_debugging_mvcc_total_put_size_in_bytes  bytes of the key-value pairs put (what etcd keeps
#                                               as history until the next compaction),
#  etcd_mvcc_put_total                          puts,
#  etcd_disk_wal_write_bytes_total              bytes written to etcd's write-ahead log;
# each is divided by the refreshes answered, after subtracting what the same control plane wrote
# while the issuers were idle (leases and the like, measured just before, per second). A count
# whose credentials the kube store's layout cannot hold (the control plane refuses them) is
# reported as such, with the refusal, and the local store is still measured.
# At the first count only, also the mixed load of load.sh (paced discovery, JWKS, refresh, WhoAmI
# and sign-ins, then the same with a login flood) on both stores.
# CPU per refresh answered (user + system ticks from /proc over the refresh load) of the issuers,
# and on the kube store of kube-apiserver and etcd, at each count. At the first count, when the
# machine has two cores or more, the refresh load once more with the control plane pinned to CPU 1
# and the issuers with the load generator to CPU 0 (`taskset`), as a cluster runs them on separate
# nodes, on both stores.
# Reports refresh/s, p50/p99, errors, bytes per refresh and the kube/local ratio at each count to
# hack/bench/results/kube-store.md (printed too).
# Usage: hack/bench/kube-store.sh [seconds per measurement, default 10] [flood loops, default 200]
#        [user counts, default "100 1000 3000 10000"]
# (ICHOR_BENCH_SHORT=1: 3 s, 50 loops, counts "100 1000")
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 10 3)}"
flood="${2:-$(full_or_short 200 50)}"
read -r -a sizes <<<"${3:-$(full_or_short "100 1000 3000 10000" "100 1000")}"
idle_seconds=$(full_or_short 5 2)
families=3
first=${sizes[0]}

# The control plane's etcd: a child process of `issuer_load control-plane`; its client URL serves
# /metrics.
etcd_url() { # plane pid
  local p
  p=$(pgrep -P "$1" -x etcd | head -1)
  [[ -n "$p" ]] || return 1
  tr '\0' '\n' <"/proc/$p/cmdline" | sed -n 's/^--listen-client-urls=//p' | cut -d, -f1
}
# etcd_sample URL: "put_bytes puts wal_bytes" now (metrics without labels).
etcd_sample() {
  curl -fsS "$1/metrics" | awk '
    $1 == "etcd_debugging_mvcc_total_put_size_in_bytes" { b = $2 }
    $1 == "etcd_mvcc_put_total" { p = $2 }
    $1 == "etcd_disk_wal_write_bytes_total" { w = $2 }
    END { printf "%.0f %.0f %.0f\n", b, p, w }'
}
now() { date +%s.%N; }
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }

declare -A refresh_local refresh_kube put_b puts wal_b bg_bps refusal cpu_local cpu_kube
mixed_local="" mixed_kube="" logs="" split_local="" split_kube="" split_cpu_local="" split_cpu_kube=""
hz=$(getconf CLK_TCK)
# refresh local|kube: the refresh load on the running issuers (under $issuer_pin, as they are);
# sets out (the load generator's report) and cpu: CPU ms per refresh answered, from /proc, of
# "issuers kube-apiserver etcd" ("-" for the control plane on the local store).
refresh() {
  local i0 i1 p0="- -" p1="- -"
  i0=$(ticks "${issuer_pids[@]}")
  [[ $1 == kube ]] && p0=$(plane_ticks)
  out=$("${issuer_pin[@]}" "$load" refresh --issuer "${urls[0]}" --issuer "${urls[1]}" --ca "$ca" \
    --clients 64 --seconds "$seconds" --seeded "$work")
  i1=$(ticks "${issuer_pids[@]}")
  [[ $1 == kube ]] && p1=$(plane_ticks)
  cpu=$(awk -v i0="$i0" -v i1="$i1" -v p0="$p0" -v p1="$p1" -v hz="$hz" -v ok="$(field ok "$out")" 'BEGIN {
    if (ok <= 0) { print "- - -"; exit }
    split(p0, a, " "); split(p1, b, " ");
    ms = 1000 / hz / ok;
    printf "%.3f", (i1 - i0) * ms;
    for (k = 1; k <= 2; k++) { if (a[k] == "-") printf " -"; else printf " %.3f", (b[k] - a[k]) * ms }
    print "" }')
  echo "$out"
  echo "CPU ms per refresh (issuers, kube-apiserver, etcd): $cpu"
}
# split_point: at the first count, the refresh load again with the control plane on one core and
# the issuers with the load generator on the other, as a cluster has them on separate nodes.
split_point() {
  issuer_pin=(taskset -c 0) plane_pin=(taskset -c 1)
  rm -rf "$work/local-state"; cp -a "$work/state" "$work/local-state"
  start_issuers local
  echo "==> split cores: local store, issuers and load generator on CPU 0: refresh, ${seconds}s"
  refresh local; split_local=$out; split_cpu_local=$cpu
  stop_issuers
  start_plane || { echo "the control plane did not start on CPU 1" >&2; cat "$work/control-plane.log" >&2; exit 1; }
  start_issuers kube
  echo "==> split cores: kube store, control plane on CPU 1, issuers and load generator on CPU 0: refresh, ${seconds}s"
  refresh kube; split_kube=$out; split_cpu_kube=$cpu
  stop_issuers
  stop_plane
  issuer_pin=() plane_pin=()
}
run_point() { # users
  local n=$1
  work_prefix=kube-store bench_users=$n bench_families=$families
  # shellcheck source=hack/bench/issuer-common.sh
  source hack/bench/issuer-common.sh
  # shellcheck source=hack/bench/kube-plane.sh
  source hack/bench/kube-plane.sh
  cp -a "$work/state" "$work/local-state"
  local out

  start_issuers local
  echo "==> $n users x $families families, local store: refresh, 64 clients, ${seconds}s"
  refresh local; refresh_local[$n]=$out; cpu_local[$n]=$cpu
  if [[ "$n" == "$first" ]]; then
    echo "==> local store: mixed load, ${seconds}s sustained + ${seconds}s with a ${flood}-loop login flood"
    mixed_local=$("$load" mixed --issuer "${urls[0]}" --issuer "${urls[1]}" \
      --pid "${issuer_pids[0]}" --pid "${issuer_pids[1]}" --ca "$ca" --seconds "$seconds" --flood "$flood")
  fi
  stop_issuers

  echo "==> $n users x $families families: starting a control plane with Ichor's chart"
  if ! start_plane; then
    refusal[$n]=$(grep -o 'Too long[^"]*\|must have at most[^"]*\|request is too large[^"]*' "$work/control-plane.log" | head -1)
    refusal[$n]="${refusal[$n]:-$(tail -n 3 "$work/control-plane.log" | tr '\n' ' ' | cut -c1-300)}"
    echo "the kube store's layout cannot hold $n users x $families families: ${refusal[$n]}"
    return 0
  fi
  cat "$work/control-plane.log"
  local etcd s0 s1 s2 t0 t1 t2
  etcd=$(etcd_url "$plane_pid") || { echo "etcd of the control plane not found" >&2; exit 1; }
  start_issuers kube
  # What the control plane writes with the issuers idle, then under the refresh load.
  s0=$(etcd_sample "$etcd"); t0=$(now)
  sleep "$idle_seconds"
  s1=$(etcd_sample "$etcd"); t1=$(now)
  echo "==> $n users x $families families, kube store: refresh, 64 clients, ${seconds}s"
  refresh kube
  s2=$(etcd_sample "$etcd"); t2=$(now)
  refresh_kube[$n]=$out; cpu_kube[$n]=$cpu
  read -r "put_b[$n]" "puts[$n]" "wal_b[$n]" "bg_bps[$n]" < <(awk -v s0="$s0" -v s1="$s1" -v s2="$s2" \
    -v t0="$t0" -v t1="$t1" -v t2="$t2" -v ok="$(field ok "$out")" 'BEGIN {
      split(s0, a, " "); split(s1, b, " "); split(s2, c, " ");
      idle = t1 - t0; busy = t2 - t1;
      if (ok <= 0 || idle <= 0) { print "- - - -"; exit }
      for (i = 1; i <= 3; i++) {
        bg = (b[i] - a[i]) / idle;
        v[i] = (c[i] - b[i] - bg * busy) / ok
      }
      printf "%.0f %.2f %.0f %.0f\n", v[1], v[2], v[3], (b[1] - a[1]) / idle }')
  echo "etcd per refresh: put bytes ${put_b[$n]}, puts ${puts[$n]}, WAL bytes ${wal_b[$n]} (idle: ${bg_bps[$n]} put bytes/s)"
  if [[ "$n" == "$first" ]]; then
    echo "==> kube store: mixed load, ${seconds}s sustained + ${seconds}s with a ${flood}-loop login flood"
    mixed_kube=$("$load" mixed --issuer "${urls[0]}" --issuer "${urls[1]}" \
      --pid "${issuer_pids[0]}" --pid "${issuer_pids[1]}" --ca "$ca" --seconds "$seconds" --flood "$flood")
  fi
  stop_issuers
  stop_plane
  if [[ "$n" == "$first" && $(nproc) -ge 2 ]]; then split_point; fi
  for f in "$work"/issuer-*.log; do
    if [ -s "$f" ]; then
      logs+=$'\n'"$n users, $(basename "$f") (last lines, warnings and up):"$'\n```\n'"$(tail -n 5 "$f")"$'\n```\n'
    fi
  done
}
for n in "${sizes[@]}"; do
  ( run_point "$n"
    declare -p refresh_local refresh_kube put_b puts wal_b bg_bps refusal cpu_local cpu_kube mixed_local \
      mixed_kube logs split_local split_kube split_cpu_local split_cpu_kube \
      >"/tmp/ichor-kube-store-$$-$n" )
  # shellcheck disable=SC1090
  source <(sed 's/^declare -A/declare -gA/; s/^declare --/declare -g/' "/tmp/ichor-kube-store-$$-$n")
  rm -f "/tmp/ichor-kube-store-$$-$n"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2fx", a/b; else print "-" }'; }
# The sustained-phase row of an endpoint in a mixed report: ok errors p50 p99.
row() { awk -F'|' -v e="$1" '$2 ~ "^ "e" " && $4 ~ "sustained" {gsub(/ /,""); print $5, $6, $9, $10}' <<<"$2" | head -1; }

kube_first="${refresh_kube[$first]:-}"
cpu_of() { cut -d' ' -f"$1" <<<"$2"; }
if [[ -n "$split_kube" ]]; then
  figure "refresh grants/s at $first users, kube store, control plane on its own core (baseline: local store, the issuers' one core)" \
    "$(field rps "$split_kube")" "$(field rps "$split_local")" ">= 0.5"
fi
if [[ -n "${cpu_kube[$first]:-}" ]]; then
  figure "issuer CPU ms per refresh at $first users, kube store (baseline: local store)" \
    "$(cpu_of 1 "${cpu_kube[$first]}")" "$(cpu_of 1 "${cpu_local[$first]}")" "-"
fi
for n in "${sizes[@]}"; do
  [[ -n "${refresh_kube[$n]:-}" ]] || continue
  k="${refresh_kube[$n]}"; l="${refresh_local[$n]}"
  figure "refresh grants/s at $n users, kube store (baseline: local store)" "$(field rps "$k")" "$(field rps "$l")" ">= 0.5"
  figure "etcd bytes put per refresh at $n users, kube store (baseline: 16 KiB)" "${put_b[$n]}" 16384 "<= 1.00"
  if [[ "$n" != "$first" && -n "$kube_first" ]]; then
    figure "refresh p99 ms at $n users, kube store (baseline: $first users)" "$(field p99_ms "$k")" "$(field p99_ms "$kube_first")" "<= 1.5"
    figure "etcd bytes put per refresh at $n users, kube store (baseline: $first users)" "${put_b[$n]}" "${put_b[$first]}" "<= 1.25"
  fi
done

out="$results_dir/kube-store.md"
{
  echo "# The issuer on the kube store beside the local store, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r);"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "Release build, loopback, ${seconds} s per measurement; \`hack/bench/kube-store.sh\` (commit $(git rev-parse --short HEAD))."
  echo "Two \`ichor-issuer\` processes per store, one external URL, requests alternating between them;"
  echo "$families refresh families per user, 64 clients rotating families of users spread over all of them."
  echo "Kube store: a fresh kube-apiserver and etcd per user count on the same machine (their CPU is in the"
  echo "figures), the chart's issuer ServiceAccount. etcd bytes are etcd's own counters over the refresh load,"
  echo "less what the control plane wrote per second with the issuers idle, divided by the refreshes answered."
  echo
  echo "## Refresh, 64 clients as fast as answered"
  echo
  echo "| users | local req/s | local p99 ms | kube req/s | kube p50 ms | kube p99 ms | kube errors | req/s kube/local | p99 kube/local | p99 / $first users | etcd put bytes per refresh | etcd puts per refresh | etcd WAL bytes per refresh | idle put bytes/s |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for n in "${sizes[@]}"; do
    l="${refresh_local[$n]:-}"
    if [[ -n "${refusal[$n]:-}" ]]; then
      echo "| $n | $(field rps "$l") | $(field p99_ms "$l") | not storable in the kube store's layout: ${refusal[$n]} | - | - | - | - | - | - | - | - | - | - |"
    elif [[ -n "${refresh_kube[$n]:-}" ]]; then
      k="${refresh_kube[$n]}"
      echo "| $n | $(field rps "$l") | $(field p99_ms "$l") | $(field rps "$k") | $(field p50_ms "$k") | $(field p99_ms "$k") | $(field errors "$k") | $(ratio "$(field rps "$k")" "$(field rps "$l")") | $(ratio "$(field p99_ms "$k")" "$(field p99_ms "$l")") | $(ratio "$(field p99_ms "$k")" "$(field p99_ms "$kube_first")") | ${put_b[$n]} | ${puts[$n]} | ${wal_b[$n]} | ${bg_bps[$n]} |"
    fi
  done
  for n in "${sizes[@]}"; do
    grep '^refresh error' <<<"${refresh_local[$n]:-}" | sed "s/^/- $n users, local: /" || true
    grep '^refresh error' <<<"${refresh_kube[$n]:-}" | sed "s/^/- $n users, kube: /" || true
  done
  echo
  echo "## CPU per refresh answered (ms, user + system from /proc, over the refresh load)"
  echo
  echo "The load generator's own CPU is not in these. Refreshes per issuer core, kube/local, is the local"
  echo "issuers' CPU per refresh over the kube issuers': what the issuers' side of a cluster provisions."
  echo
  echo "| users | local: issuers | kube: issuers | kube: kube-apiserver | kube: etcd | kube: all three | refreshes per issuer core, kube/local |"
  echo "|---|---|---|---|---|---|---|"
  for n in "${sizes[@]}"; do
    [[ -n "${cpu_kube[$n]:-}" ]] || continue
    read -r ki ka ke <<<"${cpu_kube[$n]}"
    li=$(cpu_of 1 "${cpu_local[$n]}")
    echo "| $n | $li | $ki | $ka | $ke | $(awk -v a="$ki" -v b="$ka" -v c="$ke" 'BEGIN { if (a b c ~ /^[0-9.]+$/) printf "%.3f", a + b + c; else print "-" }') | $(ratio "$li" "$ki") |"
  done
  if [[ -n "$split_kube" ]]; then
    echo
    echo "## Split cores at $first users: the control plane on CPU 1, the issuers and the load generator on CPU 0"
    echo
    echo "As a cluster has them, on separate nodes (\`taskset\`); the same seeded families, refresh load only."
    echo
    echo "| store | req/s | p50 ms | p99 ms | errors | CPU ms per refresh: issuers, kube-apiserver, etcd | req/s kube/local |"
    echo "|---|---|---|---|---|---|---|"
    echo "| local | $(field rps "$split_local") | $(field p50_ms "$split_local") | $(field p99_ms "$split_local") | $(field errors "$split_local") | $split_cpu_local | |"
    echo "| kube | $(field rps "$split_kube") | $(field p50_ms "$split_kube") | $(field p99_ms "$split_kube") | $(field errors "$split_kube") | $split_cpu_kube | $(ratio "$(field rps "$split_kube")" "$(field rps "$split_local")") |"
  fi
  echo
  echo "## Mixed load at $first users, sustained phase (paced rates)"
  echo
  echo "| endpoint | local ok/errors | kube ok/errors | local p50/p99 ms | kube p50/p99 ms | p99 kube/local |"
  echo "|---|---|---|---|---|---|"
  for e in discovery jwks refresh whoami sign-in; do
    read -r lo le l50 l99 <<<"$(row "$e" "$mixed_local")"
    read -r ko ke k50 k99 <<<"$(row "$e" "$mixed_kube")"
    echo "| $e | ${lo:-}/${le:-} | ${ko:-}/${ke:-} | ${l50:-}/${l99:-} | ${k50:-}/${k99:-} | $(ratio "${k99:-}" "${l99:-}") |"
  done
  for s in local kube; do
    echo
    echo "## The whole mixed report, $s store"
    echo
    if [[ $s == local ]]; then mixed=$mixed_local; else mixed=$mixed_kube; fi
    sed 's/^# /### /; s/^## /### /' <<<"$mixed"
  done
  echo "$logs"
} >"$out"
cat "$out"
