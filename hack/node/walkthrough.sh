#!/usr/bin/env bash
# Runs the README walkthrough alone, on the test kit's real node (cli/tests/it/node/walkthrough.rs):
# helm install of helm/ichor with the images built here, `ichor init`, the rollout of the node's
# own kube-apiserver through the test kit's Talos API, sign-ins through the issuer Service, an
# operator's rights, and a disabled user's kubectl running out. hack/test.sh runs the same test
# among the others; this script builds only what it needs first: the node's Kubernetes binaries
# (hack/kube/build.sh), its runtime packages (hack/install-test-deps.sh), the pause image
# (hack/node/build.sh), the workspace's test build and the Ichor images (hack/images/build.sh).
# Needs root (network namespace, containerd, kubelet), like hack/test.sh.
# A failed run keeps its node's directory (logs of every component) and prints where.
# Usage: hack/node/walkthrough.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ichor-ci-target}"
export ICHOR_BUILD_DIR="${ICHOR_BUILD_DIR:-$PWD/.build}" ICHOR_REQUIRE_CONSUMERS=1

hack/install-test-deps.sh
hack/kube/build.sh >/dev/null
hack/node/build.sh
# A test killed before its node's drop ran leaves processes, mounts, cgroups, a network
# namespace and changed kernel settings behind; undo them however this script ends.
trap hack/node/clean.sh EXIT
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi
# The test build hack/test.sh makes (so the images hold the binaries the tests run), then the
# images from it.
cargo nextest run --workspace --locked --profile ci --no-run
hack/images/build.sh
cargo nextest run -p ichor-cli --locked --profile ci --no-capture --run-ignored all -E 'test(/^node::walkthrough::/)'
