#!/usr/bin/env bash
# Builds the three Ichor images — ichor-controller, ichor-issuer and ichor (the CLI: ichor and
# ichor-full) — as OCI image archives, without Docker, BuildKit or a registry: each one the same
# content as the Dockerfile's final stage of that name (the binary at the same path, USER
# 65532:65532, the same ENTRYPOINT and EXPOSE) on a root file system equal to distroless
# cc-debian12:nonroot's for what the binary needs: the shared libraries it loads (`ldd`; this
# machine's Debian 12 glibc is the one distroless ships), passwd/group with root, nobody and
# nonroot, /tmp, /home/nonroot, the CA bundle, os-release and nsswitch.conf (see
# hack/images/README.md for the exact differences). The archives are deterministic (fixed
# mtimes, sorted entries, numeric owners): the same binaries give the same digests.
#
# The binaries are the ones cargo already built in $CARGO_TARGET_DIR (debug info stripped into
# the image): by default the dev profile, which `cargo nextest run --workspace` builds for the
# tests (every dependency optimised, argon2 and blake2 at opt-level 3), so the images cost no
# extra compile; `--profile release` takes target/release instead.
#
# Usage: hack/images/build.sh [--profile dev|release] [--out DIR] [--tag TAG]
#   --profile  the cargo profile whose binaries go in (default $ICHOR_IMAGE_PROFILE or dev)
#   --out      where <name>.tar goes (default $ICHOR_BUILD_DIR/images, ICHOR_BUILD_DIR=.build)
#   --tag      the image tag (default the chart's appVersion, helm/ichor/Chart.yaml), so a
#              default `helm install` of helm/ichor finds ghcr.io/maesh/ichor-issuer:<tag>
# Import into containerd with `ctr -n k8s.io images import <out>/ichor-issuer.tar`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)

profile=${ICHOR_IMAGE_PROFILE:-dev}
out=""
tag=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --profile) profile=${2:?--profile needs dev or release}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --tag) tag=${2:?--tag needs a tag}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "hack/images/build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
out=${out:-${ICHOR_BUILD_DIR:-$repo/.build}/images}
if [[ -z $tag ]]; then
  tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$repo/helm/ichor/Chart.yaml")
  [[ -n $tag ]] || { echo "hack/images/build.sh: no appVersion in helm/ichor/Chart.yaml; pass --tag" >&2; exit 1; }
fi

case $profile in
  dev) profile_dir=debug
    build_cmd="cargo nextest run --workspace --locked --profile ci --no-run (or: cargo build --locked -p ichor-controller --bin ichor-controller -p ichor-issuer --bin ichor-issuer -p ichor-cli --bin ichor --bin ichor-full)" ;;
  release) profile_dir=release
    build_cmd="cargo build --release --locked -p ichor-controller --bin ichor-controller -p ichor-issuer --bin ichor-issuer && cargo build --release --locked -p ichor-cli --bin ichor --bin ichor-full (as the Dockerfile's build stage)" ;;
  *) echo "hack/images/build.sh: --profile must be dev or release, not '$profile'" >&2; exit 2 ;;
esac

for tool in python3 ldd objcopy; do
  command -v "$tool" >/dev/null ||
    { echo "hack/images/build.sh: $tool is missing (Debian: python3, libc-bin, binutils)" >&2; exit 1; }
done
# cargo's own answer, so a target-dir set in a cargo config counts too.
target_dir=$(cd "$repo" && cargo metadata --format-version 1 --no-deps --offline |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin_dir=$target_dir/$profile_dir

for bin in ichor-controller ichor-issuer ichor ichor-full; do
  if [[ ! -x $bin_dir/$bin ]]; then
    echo "hack/images/build.sh: $bin_dir/$bin is missing: build the $profile binaries first: $build_cmd" >&2
    exit 1
  fi
done

started=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$out"
# Debug info out (the release profile has none either); the symbol table stays, so a panic's
# backtrace still names its functions.
for bin in ichor-controller ichor-issuer ichor ichor-full; do
  objcopy --strip-debug "$bin_dir/$bin" "$work/bin/$bin"
done

# name, binaries (comma-separated), exposed ports (comma-separated): the Dockerfile's final
# stages, which hack/testkit/tests/images.rs compares with these archives. The three are
# written at once (compressing the layer is most of the time).
pids=()
while IFS=' ' read -r name bins ports; do
  [[ $ports == - ]] && ports=""
  python3 "$repo/hack/images/oci_image.py" \
    --name "ghcr.io/maesh/$name" --tag "$tag" --bin-dir "$work/bin" --binaries "$bins" \
    --entrypoint "/usr/local/bin/${bins%%,*}" --ports "$ports" --out "$out/$name.tar" \
    >"$work/$name.log" 2>&1 &
  pids+=("$!:$name")
done <<'IMAGES'
ichor-controller ichor-controller -
ichor-issuer ichor-issuer 8443,8444
ichor ichor,ichor-full -
IMAGES
failed=0
for entry in "${pids[@]}"; do
  name=${entry#*:}
  wait "${entry%%:*}" || { echo "hack/images/build.sh: writing the $name image failed:" >&2; failed=1; }
  cat "$work/$name.log"
done
[[ $failed -eq 0 ]] || exit 1
echo "hack/images/build.sh: $profile binaries from $bin_dir, images in $out ($(( $(date +%s) - started ))s)"
