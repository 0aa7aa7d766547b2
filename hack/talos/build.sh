#!/usr/bin/env bash
# Builds the real Talos client the tests hold Ichor's Talos client and the test kit's fake apid
# to: hack/talos/probe (ichor-talos-probe), a small program on
# github.com/siderolabs/talos/pkg/machinery — the client library, configuration loader,
# validator and generator talosctl itself is built on — at the version pinned in
# hack/talos/probe/go.mod. The binary goes to $ICHOR_BUILD_DIR/talos/<machinery version>/
# (default .build/talos/...), linked as $ICHOR_BUILD_DIR/talos/current for the tests
# (ichor-testkit::consumers::require_talos_probe); a binary newer than the module's go.mod,
# go.sum and every .go file is not rebuilt. Go caches stay under ~/.cache, as hack/kube/build.sh
# keeps them.
# Usage: hack/talos/build.sh            (prints the binary's path last)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_dir=${ICHOR_BUILD_DIR:-$here/../../.build}
export GOMODCACHE="${GOMODCACHE:-$HOME/.cache/go-mod}" GOCACHE="${GOCACHE:-$HOME/.cache/go-build}"
export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0 GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"

src="$here/probe"
need_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")
have=$(go env GOVERSION 2>/dev/null || echo none)
if [[ "$(printf '%s\n' "go$need_go" "$have" | sort -V | head -1)" != "go$need_go" ]]; then
  echo "hack/talos/build.sh: needs Go $need_go or newer; the go on PATH ($(command -v go || echo none)) is $have" >&2
  exit 1
fi

machinery=$(sed -n 's/^\tgithub.com\/siderolabs\/talos\/pkg\/machinery \(v[^ ]*\).*/\1/p' "$src/go.mod")
[[ -n "$machinery" ]] || { echo "hack/talos/build.sh: no machinery version in $src/go.mod" >&2; exit 1; }
out="$build_dir/talos/$machinery"
bin="$out/ichor-talos-probe"
mkdir -p "$out"

if [[ -x "$bin" && "$bin" -nt "$src/go.mod" && "$bin" -nt "$src/go.sum" ]] &&
  [[ -z "$(find "$src" -name '*.go' -newer "$bin" | head -1)" ]]; then
  ln -sfn "$machinery" "$build_dir/talos/current"
  echo "$bin"
  exit 0
fi

echo "hack/talos/build.sh: building ichor-talos-probe (machinery $machinery) ..." >&2
started=$SECONDS
log=$(mktemp)
if ! (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$bin.tmp" .) >"$log" 2>&1; then
  cat "$log" >&2
  if grep -qE 'reading https?://|403 Forbidden|404 Not Found|410 Gone|unknown revision|dial tcp|no such host' "$log"; then
    echo "hack/talos/build.sh: the Go module proxy ($GOPROXY) did not serve a module the probe needs (see above)" >&2
  fi
  echo "hack/talos/build.sh: building ichor-talos-probe failed" >&2
  rm -f "$log" "$bin.tmp"
  exit 1
fi
rm -f "$log"
mv "$bin.tmp" "$bin"
echo "hack/talos/build.sh: ichor-talos-probe built in $((SECONDS - started)) s, $(du -m "$bin" | cut -f1) MB" >&2
ln -sfn "$machinery" "$build_dir/talos/current"
echo "$bin"
