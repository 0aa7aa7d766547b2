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

# go-oidc v2: the verifier library inside the kube-apiserver's JWT authenticator.
if ! command -v go >/dev/null || [[ ! -d /usr/share/gocode/src/github.com/coreos/go-oidc ]]; then
  echo "installing golang-go and golang-github-coreos-go-oidc-dev"
  apt_install golang-go golang-github-coreos-go-oidc-dev
fi
verify="$build/go-oidc-verify"
if [[ ! -x "$verify" || hack/conformance/go-oidc/verify.go -nt "$verify" ]]; then
  echo "building $verify"
  gopath="$build/gopath"
  mkdir -p "$gopath/src/ichor/go-oidc-verify"
  cp hack/conformance/go-oidc/verify.go "$gopath/src/ichor/go-oidc-verify/main.go"
  (cd "$gopath/src/ichor/go-oidc-verify" && GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOCACHE="$build/gocache" go build -o "$verify" .)
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

hack/conformance/oidc-provider/install.sh  # the external OpenID provider (npm, pinned by its lock)
