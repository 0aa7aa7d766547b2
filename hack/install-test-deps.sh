#!/usr/bin/env bash
# Installs the third-party consumers the tests run against (../shared/spec/real-consumers.md),
# when missing, and builds the small harnesses under hack/conformance/. Idempotent.
# The build output goes to $ICHOR_BUILD_DIR (default: .build in the repository).
# Usage: hack/install-test-deps.sh [--bench]   (--bench: also nginx and wrk for hack/bench/issuer.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${ICHOR_BUILD_DIR:-$PWD/.build}"
mkdir -p "$build"

apt_updated=0
apt_install() {
  if [[ $apt_updated -eq 0 ]]; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

# go-oidc v2: the verifier library inside the kube-apiserver's JWT authenticator, built from the
# Go module in hack/conformance/go-oidc/ (versions pinned by its go.mod and go.sum) with the
# machine's own Go. Modules come from the Go module proxy into $GOMODCACHE.
go_min_minor=26
go_ok() { # $1: a go binary; true when it is Go 1.$go_min_minor or newer
  local v
  v=$(GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || return 1
  [[ "$v" =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= go_min_minor))
}
go_bin=""
for candidate in "$(command -v go || true)" /usr/local/go/bin/go; do
  if [[ -n "$candidate" && -x "$candidate" ]] && go_ok "$candidate"; then
    go_bin=$candidate
    break
  fi
done
if [[ -z "$go_bin" ]]; then
  found=$(command -v go || true)
  [[ -z "$found" && -x /usr/local/go/bin/go ]] && found=/usr/local/go/bin/go
  if [[ -n "$found" ]]; then
    echo "hack/install-test-deps.sh: Go 1.$go_min_minor or newer is needed to build the go-oidc verifier; found $found: $(GOTOOLCHAIN=local "$found" version 2>&1)" >&2
  else
    echo "hack/install-test-deps.sh: Go 1.$go_min_minor or newer is needed to build the go-oidc verifier; no go on PATH nor at /usr/local/go/bin/go" >&2
  fi
  exit 1
fi
verify="$build/go-oidc-verify"
src=hack/conformance/go-oidc
if [[ ! -x "$verify" || "$src/verify.go" -nt "$verify" || "$src/go.mod" -nt "$verify" || "$src/go.sum" -nt "$verify" ]]; then
  echo "building $verify with $go_bin ($("$go_bin" env GOVERSION))"
  go_started=$(date +%s)
  (cd "$src" && GOTOOLCHAIN=local GOFLAGS=-modcacherw CGO_ENABLED=0 \
    GOMODCACHE="${GOMODCACHE:-$HOME/.cache/go-mod}" GOCACHE="${GOCACHE:-$HOME/.cache/go-build}" \
    "$go_bin" build -trimpath -o "$verify" .)
  echo "built in $(($(date +%s) - go_started)) s"
fi
echo "go-oidc verifier: $verify"

# nginx and wrk: the reference server and the load generator of hack/bench/issuer.sh.
if [[ "${1:-}" == "--bench" ]]; then
  if ! command -v wrk >/dev/null || { ! command -v nginx >/dev/null && [[ ! -x /usr/sbin/nginx ]]; }; then
    echo "installing nginx and wrk"
    apt_install nginx wrk
  fi
  echo "bench tools: $(command -v wrk) $(command -v nginx || echo /usr/sbin/nginx)"
fi

# The container runtime of the test kit's single-node cluster (hack/testkit/src/node): Debian's
# containerd and runc, the CNI plugins (bridge, host-local, portmap, loopback), iptables and
# conntrack for kube-proxy's iptables mode, iproute2 for the node's namespace and bridge.
node_missing=()
for tool in containerd runc iptables conntrack; do  # each is its own Debian package
  command -v "$tool" >/dev/null || [[ -x "/usr/sbin/$tool" ]] || node_missing+=("$tool")
done
[[ -x /usr/lib/cni/bridge ]] || node_missing+=(containernetworking-plugins)
command -v ip >/dev/null || [[ -x /usr/sbin/ip ]] || node_missing+=(iproute2)
# hack/node/build.sh compiles the pause image and the node test's server with gcc -static.
command -v gcc >/dev/null || node_missing+=(gcc libc6-dev)
if ((${#node_missing[@]})); then
  echo "installing the node's runtime: ${node_missing[*]}"
  apt_install "${node_missing[@]}"
fi
echo "node runtime: $(containerd --version | cut -d' ' -f3) runc $(runc --version | sed -n '1s/runc version //p')"

hack/conformance/oidc-provider/install.sh  # the external OpenID provider (npm, pinned by its lock)
