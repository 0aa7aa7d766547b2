# Sourced by the issuer benchmarks (hack/bench/issuer.sh, load.sh, second-factor.sh, …, from the
# repository root): builds the release issuer and load generator, makes a work directory (removed on exit with every process
# listed in `pids`), writes the test CA, keys, TLS pair and 100 users into it, and defines
# free_ports, free_port and vm (bench_users=N for another number of users, bench_families=F to
# seed F refresh families per user, bench_factors=K to give the first K users an authenticator
# app). Sets: root, target, bin, load, work, pids, ca.
# With ICHOR_BENCH_BIN_DIR set, its ichor-issuer and issuer_load are used instead of a build
# (another commit's binaries, for before/after figures on the same machine).
# The scripts that drive refresh load start the issuer with `--family-writes-per-minute 0` (no
# cap on rotations per session): they drive each session far past what a person does, which is
# what they measure.
# Usage: work_prefix=NAME; source hack/bench/issuer-common.sh
root=$PWD
target="${CARGO_TARGET_DIR:-$root/target}"

if [[ -n "${ICHOR_BENCH_BIN_DIR:-}" ]]; then
  bin="$ICHOR_BENCH_BIN_DIR/ichor-issuer"
  load="$ICHOR_BENCH_BIN_DIR/issuer_load"
else
  cargo build --quiet --release -p ichor-issuer --bin ichor-issuer --example issuer_load
  bin="$target/release/ichor-issuer"
  load="$target/release/examples/issuer_load"
fi

work=$(mktemp -d "/tmp/ichor-bench-${work_prefix:-issuer}.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# free_ports N: N distinct free ports on 127.0.0.1, one line separated by spaces. All N sockets
# are bound before any is closed, so the kernel cannot hand the same port out twice (two calls of
# a one-port picker can: the first port is free again when the second call binds).
# Usage: read -r ext int <<<"$(free_ports 2)"
free_ports() {
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "${1:-1}"
}
free_port() { free_ports 1; }
vm() { awk -v k="$2:" '$1==k {print int($2/1024)}' "/proc/$1/status"; }   # MiB

"$load" setup --dir "$work" --users "${bench_users:-100}" --families "${bench_families:-0}" \
  --factors "${bench_factors:-0}" >/dev/null
ca="$work/ca.crt"
