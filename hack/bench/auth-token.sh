#!/usr/bin/env bash
# Wall time of `ichor auth token` on its fast path (a cached ID token with time left), next to
# /bin/true in the same run, so process start-up is visible as the floor. Goal: median < 5 ms
# and within 1.5 × of /bin/true.
#
# The commands are run in interleaved rounds (each round runs every command once, in a shuffled
# order), so a burst of load from the other users of a shared machine hits all of them alike.
# Each run is one posix_spawn and wait4: its wall time, its CPU time and its page faults (from
# the child's rusage) are recorded.
#
# The issuer URL points at a closed loopback port: if the fast path touched the network, the
# command would fail, and the script checks that it succeeds first.
#
# The `ichor` built here is the shipped one (see the Dockerfile): `ichor` linked static-pie
# (-C target-feature=+crt-static on that one crate), `ichor-full` as usual. The script checks
# that the timed `ichor` keeps PIE and full RELRO.
#
# Usage: [ICHOR_BIN=…] hack/bench/auth-token.sh [RUNS, default 500; 150 with ICHOR_BENCH_SHORT=1] [OTHER_ICHOR…]
# Each OTHER_ICHOR (another build, e.g. the full tool or another commit's `ichor`) is timed in
# the same rounds. Writes hack/bench/results/auth-token.md (printed too).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

# shellcheck source=hack/bench/summary.sh
source "$root/hack/bench/summary.sh"
runs="${1:-$(full_or_short 500 150)}"
others=("${@:2}")
target="${CARGO_TARGET_DIR:-$root/target}"

if [[ -n "${ICHOR_BIN:-}" ]]; then
  bin="$ICHOR_BIN"      # a prebuilt ichor (another commit's, for before/after figures)
else
  cargo build --release -q --locked -p ichor-cli --bin ichor --bin ichor-full --manifest-path "$root/Cargo.toml"
  cargo rustc --release -q --locked -p ichor-cli --bin ichor --manifest-path "$root/Cargo.toml" \
    -- -C target-feature=+crt-static
  bin="$target/release/ichor"
fi

if ! readelf -lW "$bin" | grep -q GNU_RELRO || ! readelf -dW "$bin" | grep -q 'FLAGS_1.*NOW.*PIE'; then
  echo "$bin is not PIE with full RELRO (GNU_RELRO, BIND_NOW)" >&2
  exit 1
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
for b in "$bin" "${others[@]}"; do
  HOME="$home" "$b" "${args[@]}" >/dev/null || { echo "$b auth token failed on the fast path" >&2; exit 1; }
done

# Median and p99 wall ms, median CPU ms and median page faults of each command, in the order
# given (ours first, /bin/true second, then the others).
stats=$(HOME="$home" python3 - "$runs" "$bin" /bin/true "${others[@]}" -- "${args[@]}" <<'PY'
import os, random, sys, time
runs = int(sys.argv[1])
split = sys.argv.index("--")
bins, args = sys.argv[2:split], sys.argv[split + 1:]
argvs = [[b] if b == "/bin/true" else [b] + args for b in bins]
devnull = os.open(os.devnull, os.O_WRONLY)
actions = [(os.POSIX_SPAWN_DUP2, devnull, 1)]
samples = {i: [] for i in range(len(argvs))}
for rnd in range(30 + runs):                 # the first 30 rounds warm up
    order = list(range(len(argvs)))
    random.shuffle(order)
    for i in order:
        t0 = time.perf_counter_ns()
        pid = os.posix_spawn(argvs[i][0], argvs[i], os.environ, file_actions=actions)
        _, status, ru = os.wait4(pid, 0)
        wall = (time.perf_counter_ns() - t0) / 1e6
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{argvs[i][0]} failed")
        if rnd >= 30:
            samples[i].append((wall, (ru.ru_utime + ru.ru_stime) * 1000, ru.ru_minflt + ru.ru_majflt))
def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]
for i, argv in enumerate(argvs):
    walls = sorted(s[0] for s in samples[i])
    p99 = walls[min(len(walls) - 1, int(0.99 * len(walls)))]
    print(f"{median(walls):.2f} {p99:.2f} {median(s[1] for s in samples[i]):.2f} "
          f"{median(s[2] for s in samples[i])} {argv[0]}")
PY
)
read -r ours_median ours_p99 _ _ _ <<<"$(sed -n 1p <<<"$stats")"
read -r true_median true_p99 _ _ _ <<<"$(sed -n 2p <<<"$stats")"
size_of() { stat -c %s "$(readlink -f "$1")"; }
size=$(size_of "$bin")
full="$(dirname "$bin")/ichor-full"
sizes="\`$(basename "$bin")\` $size bytes ($(file -b "$(readlink -f "$bin")" | grep -o 'static-pie linked\|dynamically linked'))"
if [[ -f "$full" ]]; then sizes+=", \`ichor-full\` beside it $(size_of "$full") bytes"; fi
summary="| command | median ms | p99 ms | median / /bin/true | CPU ms (median) | page faults (median) |
|---|---|---|---|---|---|
$(while read -r m p cpu faults c; do
  echo "| \`$c\` | $m | $p | $(awk -v a="$m" -v b="$true_median" 'BEGIN {printf "%.2f", a / b}') | $cpu | $faults |"
done <<<"$stats")"
figure "ichor auth token, cached: median ms (baseline: /bin/true median)" "$ours_median" "$true_median" "< 5 ms and <= 1.50"
figure "ichor auth token, cached: p99 ms (baseline: /bin/true p99)" "$ours_p99" "$true_p99" "-"
figure "ichor binary, MB (baseline: none)" "$(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1e6}')" "-" "-"
out="$results_dir/auth-token.md"
{
  echo "# \`ichor auth token\` on its cached path, $(date -u +%FT%TZ)"
  echo
  echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -r); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "$runs interleaved rounds after 30 warm-up rounds; \`hack/bench/auth-token.sh\` (commit $(git -C "$root" rev-parse --short HEAD))."
  echo "Binaries: $sizes."
  echo
  echo "$summary"
} >"$out"
cat "$out"
