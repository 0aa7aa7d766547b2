#!/usr/bin/env bash
# What the kube store's write costs the control plane, by the form of the request: on a fresh
# kube-apiserver and etcd with Ichor's chart and 100 users in the per-user layout (the test kit's
# control plane, as hack/bench/kube-store.sh starts it), hack/bench/kube-write.py sends, as the
# issuer's ServiceAccount on 4 connections, N times over the users: a GET of the user's Secret
# alone; a GET and the issuer's JSON merge patch carrying the resourceVersion read (what a refresh
# sends); a GET and a PUT of the object read (the issuer's Role is given `update` in this throwaway
# control plane only: the chart grants `patch`); each write also with fieldValidation=Ignore. The
# figure is the CPU of kube-apiserver and etcd per GET+write from /proc, in rounds alternating the
# forms, the merge patch the baseline. The admission policy on ichor-credentials runs on every
# write, as in a cluster.
# Reports to hack/bench/results/kube-write.md (printed too).
# Usage: hack/bench/kube-write.sh [requests per form and round, default 2000] [rounds, default 3]
# (ICHOR_BENCH_SHORT=1: 400 requests, 2 rounds)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/summary.sh
source hack/bench/summary.sh
requests="${1:-$(full_or_short 2000 400)}"
rounds="${2:-$(full_or_short 3 2)}"
work_prefix=kube-write bench_users=100 bench_families=3
# shellcheck source=hack/bench/issuer-common.sh
source hack/bench/issuer-common.sh
# shellcheck source=hack/bench/kube-plane.sh
source hack/bench/kube-plane.sh

start_plane || { cat "$work/control-plane.log" >&2; exit 1; }
api=$(pgrep -P "$plane_pid" -x kube-apiserver | head -1)
etcd=$(pgrep -P "$plane_pid" -x etcd | head -1)
# The test kit's admin kubeconfig sits beside the client CA the apiserver was started with.
admin="$(dirname "$(tr '\0' '\n' <"/proc/$api/cmdline" | sed -n 's/^--client-ca-file=//p')")/admin.kubeconfig"
KUBECONFIG="$admin" "$ICHOR_BUILD_DIR/kube/current/kubectl" -n ichor-credentials patch role ichor-issuer \
  --type=json -p '[{"op": "add", "path": "/rules/0/verbs/-", "value": "update"}]' >/dev/null

forms=(get merge put merge-ign put-ign)
declare -A sum
for f in "${forms[@]}"; do sum[$f]=0; done
lines=""
for r in $(seq 1 "$rounds"); do
  for f in "${forms[@]}"; do
    line=$(python3 hack/bench/kube-write.py "$work/issuer.kubeconfig" "$f" "$requests" 100 "$api,$etcd")
    echo "round $r: $line"
    lines+="round $r: $line"$'\n'
    sum[$f]=$(awk -v a="${sum[$f]}" -v b="$(sed -n 's/.*total_ms=\([0-9.]*\).*/\1/p' <<<"$line")" 'BEGIN {print a + b}')
  done
done
mean() { awk -v s="${sum[$1]}" -v n="$rounds" 'BEGIN {printf "%.3f", s / n}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
figure "control-plane CPU ms per GET + PUT of a user's Secret (baseline: GET + merge patch)" "$(mean put)" "$(mean merge)" "-"
figure "control-plane CPU ms per GET + merge patch with fieldValidation=Ignore (baseline: without)" "$(mean merge-ign)" "$(mean merge)" "-"

out="$results_dir/kube-write.md"
{
  echo "# What a kube store write costs the control plane, by the form of the request, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r);"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). \`hack/bench/kube-write.sh $requests $rounds\` (commit $(git rev-parse --short HEAD))."
  echo "The test kit's kube-apiserver and etcd with Ichor's chart, 100 users in the per-user layout; the issuer's"
  echo "ServiceAccount on 4 connections; CPU of kube-apiserver + etcd from /proc, mean of $rounds rounds, forms alternating."
  echo
  echo "| form | CPU ms per GET + write (per GET for \`get\`) | against GET + merge patch |"
  echo "|---|---|---|"
  for f in "${forms[@]}"; do
    echo "| $f | $(mean "$f") | $(ratio "$(mean "$f")" "$(mean merge)") |"
  done
  echo
  echo "Each run (cpu_ms: kube-apiserver, etcd):"
  echo
  echo '```'
  printf '%s' "$lines"
  echo '```'
} >"$out"
cat "$out"
