# Sourced (after hack/bench/issuer-common.sh) by the benchmarks of the issuer on the kube store:
#  start_issuers local|kube   two `ichor-issuer` processes behind one external URL (the first's),
#                             on the local store (users and $work/local-state) or the kube store
#                             (the control plane's $work/issuer.kubeconfig); sets urls, issuer_pids;
#  stop_issuers;
#  start_plane                the test kit's control plane with the chart and setup's users and
#                             credentials (`issuer_load control-plane`, in the layout
#                             $bench_layout: per-user, the default, or legacy); sets plane_pid; returns
#                             non-zero, with its log in $work/control-plane.log, when it failed;
#  stop_plane;
#  ticks PID...               the user + system clock ticks the processes have used so far;
#  plane_ticks                the same for the control plane's kube-apiserver and etcd: "api etcd".
# issuer_pin / plane_pin: a command prefix (e.g. `taskset -c 0`) the issuers (and, by the caller,
# the load generator) / the control plane are started under; empty by default (anywhere).
export ICHOR_BUILD_DIR="${ICHOR_BUILD_DIR:-$root/.build}"
if [ ! -x "$ICHOR_BUILD_DIR/kube/current/kube-apiserver" ]; then
  echo "==> building kube-apiserver, etcd and kubectl (hack/kube/build.sh)"
  hack/kube/build.sh >/dev/null
fi

issuer_pin=()
plane_pin=()
urls=()
issuer_pids=()
start_issuers() { # store
  urls=(); issuer_pids=()
  local external="" n ext int url
  for n in 1 2; do
    read -r ext int <<<"$(free_ports 2)"
    url="https://127.0.0.1:$ext"
    external="${external:-$url}"
    local store_args=(--store local --local-users-dir "$work/users" --local-state-dir "$work/local-state")
    if [ "$1" = kube ]; then
      store_args=(--store kube --kube-ca-file "$work/apiserver-ca.crt")
    fi
    KUBECONFIG="$work/issuer.kubeconfig" RUST_LOG=warn ICHOR_ISSUER_METRICS_LISTEN=127.0.0.1:0 \
      "${issuer_pin[@]}" "$bin" --external-url "$external" \
      --listen "127.0.0.1:$ext" --internal-listen "127.0.0.1:$int" \
      --ichor-tls-dir "$work/tls" --keys-file "$work/keys.json" --trusted-proxy 127.0.0.0/8 --family-writes-per-minute 0 \
      "${store_args[@]}" 2>>"$work/issuer-$1-$n.log" &
    pids+=("$!"); issuer_pids+=("$!"); urls+=("$url")
    for _ in $(seq 1 400); do
      curl -fsS --cacert "$ca" "$url/readyz" >/dev/null 2>&1 && continue 2
      sleep 0.05
    done
    echo "issuer $1-$n did not become ready; its log:" >&2
    cat "$work/issuer-$1-$n.log" >&2
    exit 1
  done
}
stop_issuers() {
  kill "${issuer_pids[@]}" 2>/dev/null || true
  wait "${issuer_pids[@]}" 2>/dev/null || true
}

plane_pid=""
start_plane() {
  rm -f "$work/cluster-ready"
  "${plane_pin[@]}" "$load" control-plane --dir "$work" --layout "${bench_layout:-per-user}" 2>"$work/control-plane.log" &
  plane_pid=$!
  pids+=("$plane_pid")
  for _ in $(seq 1 3000); do
    [ -s "$work/cluster-ready" ] && return 0
    kill -0 "$plane_pid" 2>/dev/null || return 1
    sleep 0.1
  done
  echo "the control plane was not ready within 300 s" >>"$work/control-plane.log"
  return 1
}
stop_plane() {
  kill -TERM "$plane_pid" 2>/dev/null || true
  wait "$plane_pid" 2>/dev/null || true
}

ticks() {
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$t"
}
plane_ticks() {
  local api etcd
  api=$(pgrep -P "$plane_pid" -x kube-apiserver | head -1)
  etcd=$(pgrep -P "$plane_pid" -x etcd | head -1)
  echo "$(ticks "$api") $(ticks "$etcd")"
}
