#!/usr/bin/env bash
# A shell function that packs a root file system directory into an OCI image archive (an OCI
# image layout in a tar, what `ctr images import` reads) with no registry, Docker or BuildKit:
# one uncompressed layer, a config, a manifest and an index.json naming the image with the
# `io.containerd.image.name` annotation. Deterministic: files sorted, mtimes 0, owner and group
# root (numeric), no creation date in the config, so the same tree gives the same digest.
# Usage: source hack/images/oci.sh
#        oci_archive ROOTFS_DIR OUT.tar IMAGE_NAME 'CONFIG_JSON'
#   IMAGE_NAME: e.g. ichor.local/pause:3.10.2; CONFIG_JSON: the image config's "config"
#   object, e.g. '{"Entrypoint":["/pause"],"User":"65535:65535"}'.
# Prints the manifest digest on stdout.

# oci_tar DIR OUT: a tar of DIR's contents with fixed metadata.
oci_tar() {
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$1" -cf "$2" .
}

# oci_blob LAYOUT FILE: moves FILE into LAYOUT/blobs/sha256 under its digest; prints the digest.
oci_blob() {
  local digest
  digest=$(sha256sum "$2" | cut -d' ' -f1)
  mv "$2" "$1/blobs/sha256/$digest"
  echo "$digest"
}

oci_archive() {
  local rootfs=$1 out=$2 name=$3 config=$4
  [[ -d "$rootfs" ]] || { echo "oci_archive: $rootfs is not a directory" >&2; return 1; }
  local arch
  arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
  case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
  local layout
  layout=$(mktemp -d)
  mkdir -p "$layout/blobs/sha256"
  oci_tar "$rootfs" "$layout/layer.tar"
  local layer_size layer
  layer_size=$(stat -c %s "$layout/layer.tar")
  layer=$(oci_blob "$layout" "$layout/layer.tar")
  printf '{"architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$arch" "$config" "$layer" >"$layout/config.json"
  local config_size config_digest
  config_size=$(stat -c %s "$layout/config.json")
  config_digest=$(oci_blob "$layout" "$layout/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config_digest" "$config_size" "$layer" "$layer_size" >"$layout/manifest.json"
  local manifest_size manifest
  manifest_size=$(stat -c %s "$layout/manifest.json")
  manifest=$(oci_blob "$layout" "$layout/manifest.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest" "$manifest_size" "$name" "${name##*:}" >"$layout/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  mkdir -p "$(dirname "$out")"
  oci_tar "$layout" "$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$layout"
  echo "sha256:$manifest"
}
