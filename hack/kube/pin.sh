#!/usr/bin/env bash
# Regenerates hack/kube/apiserver/go.mod's pins for one Kubernetes version: k8s.io/kubernetes maps
# every k8s.io/* staging module to ./staging, which a dependent module ignores, so each one is
# pinned here to the v0.x release of the same minor and patch. The list comes from that version's
# own go.mod, never by hand. Usage: hack/kube/pin.sh v1.37.2
set -euo pipefail
cd "$(dirname "$0")/apiserver"
version=${1:?usage: hack/kube/pin.sh vMAJOR.MINOR.PATCH}
staging=v0.${version#v1.}
export GOMODCACHE="${GOMODCACHE:-$HOME/.cache/go-mod}" GOFLAGS=-modcacherw GOTOOLCHAIN=local
modfile=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[[ -f "$modfile" ]] || { echo "pin.sh: the Go module proxy did not serve k8s.io/kubernetes@$version" >&2; exit 1; }
mods=$(sed -n 's|.*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*|\1|p' "$modfile")
[[ -n "$mods" ]] || { echo "pin.sh: no staging replaces found in $modfile" >&2; exit 1; }
args=()
for mod in $mods; do args+=("-replace=$mod=$mod@$staging"); done
go mod edit "${args[@]}"
go get "k8s.io/kubernetes@$version"
go get -tool k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
go mod tidy
echo "pinned $(wc -w <<<"$mods") staging modules to $staging"
