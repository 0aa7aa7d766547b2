#!/usr/bin/env bash
# Every benchmark in its short form, one after the other, and one table of their figures: each
# figure beside the baseline measured in the same run, their ratio and the goal. A change's effect
# on every figure is this one command, before and after.
# The release binaries are built once and copied to a private directory (another engineer's build
# cannot replace them mid-run); each script's own report and log go to a work directory, so the
# full reports in hack/bench/results/ are not replaced; the table goes to
# hack/bench/results/all.md (printed too). A script that fails is listed as failed and the
# others still run; the exit status is non-zero then.
# Usage: hack/bench/all.sh [SCRIPT ...]   (default: every bench; e.g. `all.sh auth-token graph-scale`)
# With ICHOR_BENCH_BIN_DIR set, its binaries (ichor-issuer, issuer_load, ichor, ichor-controller)
# are used instead of a build.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
target="${CARGO_TARGET_DIR:-$root/target}"
scripts=("$@")
if [[ ${#scripts[@]} -eq 0 ]]; then
  scripts=(auth-token rsa graph-scale identity limits webhook webhook-apiserver issuer load user-queue nat abuse
    kube-store kube-secret kube-write second-factor)
fi
work=$(mktemp -d /tmp/ichor-bench-all.XXXXXX)
echo "work directory (logs and short reports): $work"

mkdir -p "$work/bin" "$work/results"
if [[ -n "${ICHOR_BENCH_BIN_DIR:-}" ]]; then
  echo "==> using the binaries in $ICHOR_BENCH_BIN_DIR"
  cp "$ICHOR_BENCH_BIN_DIR"/* "$work/bin/" 2>/dev/null || true
else
  echo "==> building the release binaries"
  # One invocation, so the workspace crates are built once with one set of features.
  cargo build --quiet --release -p ichor-issuer -p ichor-cli -p ichor-controller \
    --bin ichor-issuer --bin ichor --bin ichor-full --bin ichor-controller --example issuer_load
  # The shipped `ichor` (see the Dockerfile): linked again static-pie, that crate only.
  cargo rustc --quiet --release -p ichor-cli --bin ichor -- -C target-feature=+crt-static
  # `ichor` runs `ichor-full` from its own directory for every command but a cached token.
  cp "$target/release/ichor-issuer" "$target/release/examples/issuer_load" "$target/release/ichor" \
    "$target/release/ichor-full" "$target/release/ichor-controller" "$work/bin/"
fi

export ICHOR_BENCH_SHORT=1 ICHOR_BENCH_BIN_DIR="$work/bin" ICHOR_BIN="$work/bin/ichor"
export ICHOR_BENCH_RESULTS="$work/results" ICHOR_BENCH_SUMMARY="$work/summary.tsv"
: >"$ICHOR_BENCH_SUMMARY"
status=()
failed=0
for s in "${scripts[@]}"; do
  echo "==> $s"
  started=$(date +%s)
  before=$(wc -l <"$ICHOR_BENCH_SUMMARY")
  if "hack/bench/$s.sh" >"$work/$s.log" 2>&1; then result=ok; else result="FAILED (log: $work/$s.log)"; failed=1; fi
  took=$(( $(date +%s) - started ))
  status+=("| $s | $result | $took s | $(( $(wc -l <"$ICHOR_BENCH_SUMMARY") - before )) |")
  echo "    $result in $took s"
  [[ "$result" == ok ]] || tail -n 5 "$work/$s.log" | sed 's/^/    /'
done

mkdir -p hack/bench/results
out="hack/bench/results/all.md"
{
  echo "# Every benchmark, short form, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r);"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (the machine may be shared: read the ratios, not the values)."
  echo "\`hack/bench/all.sh\` (commit $(git rev-parse --short HEAD)); every baseline was measured in the same run as its figure."
  echo
  echo "| figure | value | baseline | ratio | goal |"
  echo "|---|---|---|---|---|"
  awk -F'\t' '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$ICHOR_BENCH_SUMMARY"
  echo
  echo "| script | result | wall | figures |"
  echo "|---|---|---|---|"
  printf '%s\n' "${status[@]}"
} >"$out"
cat "$out"
echo "written: $out"
exit "$failed"
