#!/usr/bin/env bash
# Builds the real control plane the tests run against: kube-apiserver and kubectl from
# k8s.io/kubernetes (and, for the test kit's single-node cluster, kubelet, kube-proxy,
# kube-controller-manager and kube-scheduler from the same module with the same version stamp),
# the differential validator (apiserver/validate), etcd from go.etcd.io/etcd/server/v3, and the helm client that installs the chart on it from
# helm.sh/helm/v3/cmd/helm, each from the modules pinned in hack/kube/{apiserver,etcd,helm}/go.mod.
# Binaries go to $ICHOR_BUILD_DIR/kube/<version>/ (default .build/kube/...), linked as
# $ICHOR_BUILD_DIR/kube/current for the tests (ichor-testkit::consumers); a binary already
# there and newer than its go.sum is not rebuilt. Go caches stay under ~/.cache, so a second run
# on the same machine builds nothing.
# Usage: hack/kube/build.sh            (prints the binaries' directory last)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_dir=${ICHOR_BUILD_DIR:-$here/../../.build}
export GOMODCACHE="${GOMODCACHE:-$HOME/.cache/go-mod}" GOCACHE="${GOCACHE:-$HOME/.cache/go-build}"
export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0 GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"

need_go=1.26
have=$(go env GOVERSION 2>/dev/null || echo none)
if [[ "$(printf '%s\n' "go$need_go" "$have" | sort -V | head -1)" != "go$need_go" ]]; then
  echo "hack/kube/build.sh: needs Go $need_go or newer; the go on PATH ($(command -v go || echo none)) is $have" >&2
  exit 1
fi

k8s=$(sed -n 's/^\tk8s.io\/kubernetes \(v[^ ]*\).*/\1/p' "$here/apiserver/go.mod")
etcd=$(sed -n 's/^\tgo.etcd.io\/etcd\/server\/v3 \(v[^ ]*\).*/\1/p' "$here/etcd/go.mod")
helm=$(sed -n 's/^\thelm.sh\/helm\/v3 \(v[^ ]*\).*/\1/p' "$here/helm/go.mod")
helm_client_go=$(sed -n 's/^\tk8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$here/helm/go.mod")
out="$build_dir/kube/$k8s-etcd$etcd"
mkdir -p "$out"

fresh() { [[ -x "$out/$1" && "$out/$1" -nt "$2" && "$out/$1" -nt "$3" ]]; }

# build DIR NAME PACKAGE LDFLAGS: one binary, or a clear error naming what failed.
build() {
  local dir=$1 name=$2 pkg=$3 ldflags=$4
  if fresh "$name" "$here/$dir/go.sum" "$here/$dir/go.mod" && { [[ "$pkg" != ./* ]] || [[ -z "$(find "$here/$dir/${pkg#./}" -newer "$out/$name" -name '*.go' | head -1)" ]]; }; then
    return 0
  fi
  echo "hack/kube/build.sh: building $name ($pkg) ..." >&2
  local started=$SECONDS log
  log=$(mktemp)
  if ! (cd "$here/$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$name.tmp" "$pkg") >"$log" 2>&1; then
    cat "$log" >&2
    if grep -qE 'reading https?://|404 Not Found|410 Gone|unknown revision|dial tcp|no such host' "$log"; then
      echo "hack/kube/build.sh: the Go module proxy ($GOPROXY) did not serve a module $name needs (see above)" >&2
    fi
    echo "hack/kube/build.sh: building $name failed" >&2
    rm -f "$log" "$out/$name.tmp"
    exit 1
  fi
  rm -f "$log"
  mv "$out/$name.tmp" "$out/$name"
  echo "hack/kube/build.sh: $name built in $((SECONDS - started)) s, $(du -m "$out/$name" | cut -f1) MB" >&2
}

minor=${k8s#v1.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  stamp+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build etcd etcd go.etcd.io/etcd/server/v3 ""
build apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$stamp"
build apiserver kubectl k8s.io/kubernetes/cmd/kubectl "$stamp"
for node_binary in kube-controller-manager kube-scheduler kube-proxy kubelet; do
  build apiserver "$node_binary" "k8s.io/kubernetes/cmd/$node_binary" "$stamp"
done
if [[ -d "$here/apiserver/validate" ]]; then
  build apiserver authn-validate ./validate ""
fi
# helm: stamped as its release build is (its version, and the Kubernetes version of its
# client-go as the default capabilities of `helm template`).
helm_stamp="-X helm.sh/helm/v3/internal/version.version=$helm -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  helm_stamp+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm_client_go"
done
build helm helm helm.sh/helm/v3/cmd/helm "$helm_stamp"
ln -sfn "$(basename "$out")" "$build_dir/kube/current"
echo "$out"
