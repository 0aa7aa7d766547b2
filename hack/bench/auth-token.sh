#!/usr/bin/env bash
# Wall time of `ichor auth token` on its fast path (a cached ID token with time left), next to
# /bin/true in the same run, so process start-up is visible as the floor. Target: median < 5 ms.
#
# The issuer URL points at a closed loopback port: if the fast path touched the network, the
# command would fail, and the script checks that it succeeds first.
#
# With a second ichor binary (another commit's build), both are timed in the same run,
# interleaved, so the two medians compare under the same load.
#
# Usage: [ICHOR_BIN=…] hack/bench/auth-token.sh [RUNS, default 300; 100 with ICHOR_BENCH_SHORT=1] [OTHER_ICHOR]
# (needs hyperfine). Writes hack/bench/results/auth-token-<date>.md (printed too).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

# shellcheck source=hack/bench/summary.sh
source "$root/hack/bench/summary.sh"
runs="${1:-$(full_or_short 300 100)}"
other="${2:-}"
target="${CARGO_TARGET_DIR:-$root/target}"

if [[ -n "${ICHOR_BIN:-}" ]]; then
  bin="$ICHOR_BIN"      # a prebuilt ichor (another commit's, for before/after figures)
else
  cargo build --release -q -p ichor-cli --manifest-path "$root/Cargo.toml"
  bin="$target/release/ichor"
fi

home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
issuer="http://127.0.0.1:9"          # the discard port: nothing answers there
client="ichor-cli"
audience="ichor-kube"

# The cache file name: hex SHA-256 over each part prefixed with its length as a big-endian u64
# (CacheKey::file_stem).
stem="$(
  for part in "$issuer" "$client" "$audience"; do
    printf '\x00\x00\x00\x00\x00\x00\x00'
    printf "\\x$(printf %02x "${#part}")"
    printf '%s' "$part"
  done | sha256sum | cut -d' ' -f1
)"
mkdir -p -m 0700 "$home/.ichor/auth"
exp=$(( $(date +%s) + 3600 ))
umask 077
cat > "$home/.ichor/auth/$stem.json" <<JSON
{
  "v": 1,
  "issuer": "$issuer",
  "clientId": "$client",
  "audience": "$audience",
  "endpoints": null,
  "subject": "bench",
  "groups": ["viewer"],
  "idToken": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJiZW5jaCJ9.c2lnbmF0dXJl",
  "idTokenExp": $exp,
  "refreshToken": null
}
JSON

args=(auth token --issuer "$issuer" --client-id "$client" --audience "$audience")
cmd=("$bin" "${args[@]}")
HOME="$home" "${cmd[@]}" >/dev/null || { echo "ichor auth token failed on the fast path" >&2; exit 1; }
if [[ -n "$other" ]]; then
  HOME="$home" "$other" "${args[@]}" >/dev/null || { echo "$other auth token failed on the fast path" >&2; exit 1; }
fi

command -v hyperfine >/dev/null || { echo "hyperfine is needed (apt-get install hyperfine)" >&2; exit 1; }
json="$home/hyperfine.json"
commands=("${cmd[*]}" "/bin/true")
if [[ -n "$other" ]]; then commands+=("$other ${args[*]}"); fi
HOME="$home" hyperfine -N --warmup 30 --runs "$runs" --export-json "$json" "${commands[@]}" >&2
# Median and p99 in ms of each command, from the exported run times.
stats=$(python3 - "$json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    t = sorted(r["times"])
    p99 = t[min(len(t) - 1, int(0.99 * len(t)))]
    print(f"{r['median'] * 1000:.2f} {p99 * 1000:.2f} {r['command'].split()[0]}")
PY
)
read -r ours_median ours_p99 _ <<<"$(sed -n 1p <<<"$stats")"
read -r true_median true_p99 _ <<<"$(sed -n 2p <<<"$stats")"
size=$(stat -c %s "$(readlink -f "$bin")")
summary="| command | median ms | p99 ms | median / /bin/true |
|---|---|---|---|
$(while read -r m p c; do
  echo "| \`$c\` | $m | $p | $(awk -v a="$m" -v b="$true_median" 'BEGIN {printf "%.2f", a / b}') |"
done <<<"$stats")"
figure "ichor auth token, cached: median ms (baseline: /bin/true median)" "$ours_median" "$true_median" "< 5 ms and <= 1.50"
figure "ichor auth token, cached: p99 ms (baseline: /bin/true p99)" "$ours_p99" "$true_p99" "-"
figure "ichor binary, MB (baseline: none)" "$(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1e6}')" "-" "-"
out="$results_dir/auth-token-$(date -u +%F).md"
{
  echo "# \`ichor auth token\` on its cached path, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r)."
  echo "hyperfine -N, $runs runs each after 30 warm-up runs; \`hack/bench/auth-token.sh\` (commit $(git -C "$root" rev-parse --short HEAD))."
  echo "Binary: $size bytes."
  echo
  echo "$summary"
} >"$out"
cat "$out"
