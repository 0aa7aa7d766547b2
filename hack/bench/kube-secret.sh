#!/usr/bin/env bash
# The credentials Secret on the kube store as users grow: 100, 1,000 and 3,000 users with three
# refresh families each (seeded by `issuer_load setup --families 3`, as if each had signed in three
# times). For each size, on a fresh real kube-apiserver and etcd from the test kit (the chart
# installed, the users as IchorUsers, one `ichor-user-credentials` Secret): the Secret's size
# (the sum of its data values, which the API server bounds at 1 MiB, and the object's JSON as a GET
# returns it), then two `ichor-issuer --store kube` processes under the refresh load (64 clients
# rotating all the seeded families, dealt to them in turn, as fast as answered). p50/p99
# are set against the smallest size in the same run. A size whose Secret the API server refuses
# is reported with the refusal. Loopback, release build; writes
# hack/bench/results/kube-secret.md (printed too).
# Usage: hack/bench/kube-secret.sh [seconds of load per size, default 10] [sizes, default "100 1000 3000"]
# (ICHOR_BENCH_SHORT=1: 3 s, sizes "100 1000")
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
seconds="${1:-$(full_or_short 10 3)}"
read -r -a sizes <<<"${2:-$(full_or_short "100 1000 3000" "100 1000")}"
families=3
limit=$((1024 * 1024))

declare -A data_bytes json_bytes rps p50 p99 errs refusal
run_size() { # users
  local n=$1
  work_prefix=kube-secret bench_users=$n bench_families=$families bench_layout=legacy
  # shellcheck source=hack/bench/issuer-common.sh
  source hack/bench/issuer-common.sh
  # shellcheck source=hack/bench/kube-plane.sh
  source hack/bench/kube-plane.sh
  # The Secret's data as the control plane writes it: per user, the entry's JSON (its value).
  data_bytes[$n]=$(python3 -c 'import json,sys
e = json.load(open(sys.argv[1]))["entries"]
print(sum(len(json.dumps(v, separators=(",", ":"))) for v in e.values()))' "$work/state/credentials.json")
  echo "==> $n users x $families families: Secret data ${data_bytes[$n]} bytes; starting the control plane"
  if ! start_plane; then
    refusal[$n]=$(grep -o 'Too long[^"]*\|must have at most[^"]*\|request is too large[^"]*' "$work/control-plane.log" | head -1)
    refusal[$n]="${refusal[$n]:-$(tail -n 3 "$work/control-plane.log" | tr '\n' ' ' | cut -c1-300)}"
    echo "refused: ${refusal[$n]}"
    return 0
  fi
  json_bytes[$n]=$(KUBECONFIG="$work/issuer.kubeconfig" "$ICHOR_BUILD_DIR/kube/current/kubectl" \
    -n ichor-system get secret ichor-user-credentials -o json | wc -c)
  start_issuers kube
  local out
  out=$("$load" refresh --issuer "${urls[0]}" --issuer "${urls[1]}" --ca "$ca" --clients 64 \
    --seconds "$seconds" --seeded "$work")
  echo "$out"
  field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
  rps[$n]=$(field rps "$out"); p50[$n]=$(field p50_ms "$out"); p99[$n]=$(field p99_ms "$out")
  errs[$n]=$(field errors "$out")
  stop_issuers
  stop_plane
}
for n in "${sizes[@]}"; do
  ( run_size "$n"; declare -p data_bytes json_bytes rps p50 p99 errs refusal >"/tmp/ichor-kube-secret-$$-$n" )
  # shellcheck disable=SC1090
  source <(sed 's/^declare -A/declare -gA/' "/tmp/ichor-kube-secret-$$-$n")
  rm -f "/tmp/ichor-kube-secret-$$-$n"
done

# Where the 1 MiB runs out: the per-user share of the largest size's data, extrapolated.
largest=${sizes[-1]}
per_user=$(awk -v b="${data_bytes[$largest]}" -v n="$largest" 'BEGIN {printf "%.0f", b / n}')
runs_out=$(awk -v p="$per_user" -v l="$limit" 'BEGIN {printf "%d", l / p}')
small=${sizes[0]}
for n in "${sizes[@]}"; do
  figure "credentials Secret data bytes at $n users x $families families (baseline: the 1 MiB limit)" "${data_bytes[$n]}" "$limit" "< 1.00"
  [[ -n "${p99[$n]:-}" && "$n" != "$small" ]] && \
    figure "kube store refresh p99 ms at $n users x $families families (baseline: $small users)" "${p99[$n]}" "${p99[$small]}" "<= 2.0"
done

out="$results_dir/kube-secret.md"
{
  echo "# The credentials Secret as users grow, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); shared with other builds."
  echo "Release build, loopback, ${seconds} s of refresh load per size; \`hack/bench/kube-secret.sh\` (commit $(git rev-parse --short HEAD))."
  echo "Per size a fresh kube-apiserver and etcd (their CPU is in the figures), the chart installed, $families refresh"
  echo "families per user; two \`ichor-issuer --store kube\` processes, 64 clients rotating families of users spread over all."
  echo
  echo "| users | Secret data bytes | of 1 MiB | Secret JSON bytes (GET) | refresh/s | errors | p50 ms | p99 ms | p99 / $small users |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for n in "${sizes[@]}"; do
    if [[ -n "${refusal[$n]:-}" ]]; then
      echo "| $n | ${data_bytes[$n]} | $(awk -v a="${data_bytes[$n]}" -v l="$limit" 'BEGIN {printf "%.2f", a / l}') | refused: ${refusal[$n]} | - | - | - | - | - |"
    else
      echo "| $n | ${data_bytes[$n]} | $(awk -v a="${data_bytes[$n]}" -v l="$limit" 'BEGIN {printf "%.2f", a / l}') | ${json_bytes[$n]} | ${rps[$n]} | ${errs[$n]} | ${p50[$n]} | ${p99[$n]} | $(awk -v a="${p99[$n]}" -v b="${p99[$small]}" 'BEGIN {printf "%.2f", a / b}') |"
    fi
  done
  echo
  echo "Data per user with $families families: about $per_user bytes, so the Secret's 1 MiB of data runs out"
  echo "at about **$runs_out users** with $families families each (see docs/credentials-sharding.md)."
} >"$out"
cat "$out"
