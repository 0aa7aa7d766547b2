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
# Usage: [ICHOR_BIN=…] hack/bench/auth-token.sh [RUNS] [OTHER_ICHOR]   (hyperfine when installed;
# else a date loop)
set -euo pipefail

runs="${1:-300}"
other="${2:-}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
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

if command -v hyperfine >/dev/null; then
  json="$home/hyperfine.json"
  commands=("${cmd[*]}" "/bin/true")
  if [[ -n "$other" ]]; then commands+=("$other ${args[*]}"); fi
  HOME="$home" hyperfine -N --warmup 30 --runs "$runs" --export-json "$json" "${commands[@]}" >&2
  # Medians in ms from the exported JSON (no jq needed).
  for i in $(seq 0 $(( ${#commands[@]} - 1 ))); do
    python3 - "$json" "$i" <<'PY' 2>/dev/null || true
import json, sys
r = json.load(open(sys.argv[1]))["results"][int(sys.argv[2])]
print(f"median {r['median'] * 1000:.2f} ms  {r['command'].split()[0]}")
PY
  done
else
  median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m/1e6}'; }
  export HOME="$home"
  ours="$home/ours.ns" base="$home/true.ns" theirs="$home/other.ns"
  : >"$ours"; : >"$base"; : >"$theirs"
  for _ in $(seq "$runs"); do
    s=$(date +%s%N); "${cmd[@]}" >/dev/null; e=$(date +%s%N); echo $((e - s)) >>"$ours"
    s=$(date +%s%N); /bin/true; e=$(date +%s%N); echo $((e - s)) >>"$base"
    if [[ -n "$other" ]]; then
      s=$(date +%s%N); "$other" "${args[@]}" >/dev/null; e=$(date +%s%N); echo $((e - s)) >>"$theirs"
    fi
  done
  echo "median $(median <"$ours") ms  $bin"
  echo "median $(median <"$base") ms  /bin/true"
  if [[ -n "$other" ]]; then echo "median $(median <"$theirs") ms  $other"; fi
fi
