#!/usr/bin/env bash
# The one test command: installs what the tests need when it is missing, then runs the format
# check, clippy (warnings are errors), the CRD freshness check, the whole test suite with insta
# in check mode and a 10-second fuzz run of every fuzz target. What the tests run against and
# why (the real control plane, node, Talos client and OIDC consumers; golden files, journals,
# fuzzing): docs/architecture.md, "Testing"; the crates and which may depend on which: its
# "The dependency rule" and "The crate map".
# Usage: hack/test.sh [--quick]   (--quick skips clippy and the fuzz run)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

# Each step header says when it started (seconds into the run), so a slow step shows in the log.
step() { printf '\n==> %s   [t+%ss]\n' "$*" "$(( $(date +%s) - started ))"; }
# The machine's own Go (1.26+) before any other on PATH (Debian's packages may bring an older one).
[[ -x /usr/local/go/bin/go ]] && export PATH="/usr/local/go/bin:$PATH"
started=$(date +%s)

step "toolchain"
cargo --version
if ! cargo nextest --version >/dev/null 2>&1; then
  step "installing cargo-nextest (missing)"
  # Without self-update (the feature set nextest recommends for CI builds) and at opt-level 1:
  # a runner waits on its tests, and this build is half as long (197 s against 376 s here).
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --locked cargo-nextest \
    --no-default-features --features default-no-update
fi
for tool in clippy fmt; do
  if ! cargo "$tool" --version >/dev/null 2>&1; then
    component=$tool
    [[ $tool == fmt ]] && component=rustfmt
    step "installing the $component component (missing)"
    rustup component add "$component" ||
      { echo "hack/test.sh: cargo $tool is missing and rustup could not add $component" >&2; exit 1; }
  fi
done

# Third-party consumers used by the tests (see ../shared/spec/real-consumers.md). Tests find
# them under $ICHOR_BUILD_DIR. A test that needs one is #[ignore = "needs ...: <command>"], so a
# plain `cargo test` lists it as ignored; the test step below runs them all (--run-ignored all),
# and with ICHOR_REQUIRE_CONSUMERS=1 a missing consumer fails its test.
export ICHOR_BUILD_DIR="${ICHOR_BUILD_DIR:-$PWD/.build}" ICHOR_REQUIRE_CONSUMERS=1
step "test dependencies"
hack/install-test-deps.sh
step "the real control plane: kube-apiserver, kubectl, etcd and helm from their Go modules (hack/kube/build.sh)"
hack/kube/build.sh
step "the real Talos client: ichor-talos-probe on talosctl's machinery module (hack/talos/build.sh)"
hack/talos/build.sh
step "the node's images: pause and the node test's server as OCI archives (hack/node/build.sh)"
hack/node/build.sh
# A test killed before its node's drop ran leaves processes, mounts, cgroups, a network
# namespace and changed kernel settings behind; undo them however this script ends.
trap hack/node/clean.sh EXIT

step "cargo fmt --check"
cargo fmt --all -- --check

if [[ $quick -eq 0 ]]; then
  step "cargo clippy (warnings are errors)"
  cargo clippy --workspace --all-targets --locked -- -D warnings
  step "cargo clippy on the fuzz crate (fuzz/, its own workspace)"
  cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings
fi

step "the ichor CLI (the kubectl exec plugin) links neither kube-runtime nor the controller"
linked=$(cargo tree --locked -p ichor-cli -e normal --prefix none --format '{p}' | sort -u)
for heavy in kube-runtime ichor-controller; do
  if grep -q "^$heavy " <<<"$linked"; then
    echo "hack/test.sh: ichor-cli depends on $heavy (cargo tree -p ichor-cli -e normal -i $heavy)" >&2
    exit 1
  fi
done

step "README.md's Layout and docs/architecture.md's crate map follow the workspace"
hack/layout.sh

step "helm chart: render, lint, Kubernetes schemas, RBAC checks, snapshots (golden/chart/)"
hack/chart/test.sh

# The test step's own build, done first so the images, the CRD check and the UI's browser tests
# run its binaries (nextest builds every workspace binary beside the tests): the step then finds
# everything fresh, and nothing is compiled twice with another feature set.
step "the test binaries (cargo nextest --no-run), then the Ichor images from them (hack/images/build.sh)"
cargo nextest run --workspace --locked --profile ci --no-run
hack/images/build.sh
target_dir=$(cargo metadata --format-version 1 --no-deps --offline |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')

step "generated CRDs are in sync with the Rust types"
"$target_dir/debug/crdgen" --check

step "web UI: build, unit tests, Chromium end-to-end against ichor dev (hack/ui/test.sh)"
ICHOR_PREBUILT_BIN_DIR="$target_dir/debug" hack/ui/test.sh

step "tests, the ignored ones that need a consumer included (insta in check mode)"
export INSTA_UPDATE=no INSTA_FORCE_PASS=0 CI="${CI:-true}"
cargo nextest run --workspace --locked --no-fail-fast --profile ci --run-ignored all
cargo test --workspace --locked --doc

if [[ $quick -eq 0 ]]; then
  # libFuzzer with AddressSanitizer on the stable toolchain (hack/fuzz.sh sets RUSTC_BOOTSTRAP=1
  # for cargo-fuzz's unstable flags). The 10-minute-per-target run is `hack/fuzz.sh 600` (see
  # SECURITY.md); the committed seeds also run as ordinary tests (fuzz/targets/tests/corpus.rs).
  step "fuzz: every target for 10 s from the committed corpus (hack/fuzz.sh 10)"
  hack/fuzz.sh 10
fi

printf '\nhack/test.sh: all checks passed in %ss\n' "$(( $(date +%s) - started ))"
