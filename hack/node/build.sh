#!/usr/bin/env bash
# Builds what the test kit's single-node cluster (hack/testkit/src/node) needs besides the
# Kubernetes binaries of hack/kube/build.sh: the pause image (the pods' sandbox), compiled from
# build/pause/linux/pause.c of the pinned k8s.io/kubernetes module in the Go module cache
# (gcc -Os -static) and packed as an OCI archive by the packer of the Ichor images
# (hack/images/oci_image.py --static), and the node test's static HTTP server image. No
# registry: the node imports the archives into its containerd.
# Output: $ICHOR_BUILD_DIR/images/{pause,node-test-http}.tar (rebuilt only when a source is
# newer). Usage: hack/node/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build_dir=${ICHOR_BUILD_DIR:-$repo/.build}
export GOMODCACHE="${GOMODCACHE:-$HOME/.cache/go-mod}" GOFLAGS=-modcacherw GOTOOLCHAIN=local
images="$build_dir/images"
mkdir -p "$images"
command -v gcc >/dev/null || { echo "hack/node/build.sh: gcc is needed to build the pause image" >&2; exit 1; }

k8s=$(sed -n 's/^\tk8s.io\/kubernetes \(v[^ ]*\).*/\1/p' "$repo/hack/kube/apiserver/go.mod")
src="$GOMODCACHE/k8s.io/kubernetes@$k8s/build/pause"
if [[ ! -f "$src/linux/pause.c" ]]; then
  (cd "$repo/hack/kube/apiserver" && go mod download "k8s.io/kubernetes@$k8s")
fi
tag=$(sed -n 's/^TAG ?= //p' "$src/Makefile")
[[ -n "$tag" ]] || { echo "hack/node/build.sh: no TAG in $src/Makefile" >&2; exit 1; }

# image NAME TAG TAR SOURCE USER CFLAGS...: compiles SOURCE into /NAME of a one-file image
# ichor.local/NAME:TAG running as USER (uid:gid).
image() {
  local name=$1 tag=$2 out=$3 source=$4 user=$5
  shift 5
  if [[ -f "$out" && "$out" -nt "$source" && "$out" -nt "$repo/hack/images/oci_image.py" && "$out" -nt "$0" ]]; then
    return 0
  fi
  local started=$SECONDS rootfs
  rootfs=$(mktemp -d)
  gcc -Os -Wall -Werror -static "$@" -o "$rootfs/$name" "$source"
  strip "$rootfs/$name"
  chmod 0755 "$rootfs" "$rootfs/$name"
  python3 "$repo/hack/images/oci_image.py" --name "ichor.local/$name" --tag "$tag" \
    --static "$rootfs/$name" --entrypoint "/$name" --user "$user" --out "$out" >/dev/null
  rm -rf "$rootfs"
  echo "hack/node/build.sh: $(basename "$out") built in $((SECONDS - started)) s, $(du -k "$out" | cut -f1) KiB" >&2
}

image pause "$tag" "$images/pause.tar" "$src/linux/pause.c" 65535:65535 \
  "-DVERSION=v$tag-ichor"
image node-test-http 1 "$images/node-test-http.tar" "$here/http.c" 65532:65532
echo "$images"
