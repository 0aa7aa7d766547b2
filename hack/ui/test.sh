#!/usr/bin/env bash
# The web UI's tests: installs Chromium, certutil and the npm dependencies when missing, builds
# the UI (type check + vite) and fails when the committed build (ui/dist, embedded in the issuer
# at compile time) differs from it, runs its unit tests (vitest), builds `ichor` and `ichor-full`, then drives the
# UI embedded in it in headless Chromium (playwright-core) against a real `ichor dev` on a free
# port with a temporary state directory (ui/e2e/run.mjs), after the walkthrough's browser step
# (ui/e2e/walkthrough.mjs, the script the node walkthrough test runs) against its own `ichor dev`
# (ui/e2e/walkthrough-dev.mjs). Screenshots (1280x800 and 390x844) go to target/ui-screenshots/.
# Exits non-zero on any failure; the last line is `ui: N passed, M failed`.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v certutil >/dev/null 2>&1 || missing+=(libnss3-tools)
# A Japanese font, so that the Japanese screenshots and layout checks measure real glyphs.
[[ -n $(fc-list :lang=ja 2>/dev/null) ]] || missing+=(fonts-ipafont-gothic)
if ((${#missing[@]})); then
  echo "hack/ui/test.sh: installing ${missing[*]}"
  # A fresh machine has no package lists yet: update them first.
  apt-get -o DPkg::Lock::Timeout=600 update -qq ||
    { echo "hack/ui/test.sh: apt-get update failed" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null ||
    { echo "hack/ui/test.sh: apt-get install ${missing[*]} failed" >&2; exit 1; }
fi

cd "$repo/ui"
# The locked dependencies, exactly (`npm ci` never rewrites package-lock.json); skipped while
# node_modules is newer than the lock.
if [[ ! -d node_modules || ! node_modules/.package-lock.json -nt package-lock.json ]]; then
  npm ci --no-audit --no-fund || {
    echo "hack/ui/test.sh: npm ci failed (above). When it refused ui/package-lock.json (out of sync" >&2
    echo "  with ui/package.json), regenerate the lock with Node 20 and npm 11:" >&2
    echo "    cd ui && npm install --package-lock-only --no-audit --no-fund" >&2
    echo "  then check that npm ci takes it, review the diff and commit ui/package-lock.json." >&2
    exit 1
  }
fi
# The TypeScript of the proto (protoc-gen-es through buf, both from npm) must match the proto.
npm run --silent gen
git diff --exit-code -- src/gen || { echo "ui: src/gen is stale: run npm run gen in ui/ and commit"; exit 1; }
# The binary serves the committed ui/dist: it must be exactly what the sources build. Built
# beside it and compared, not over it: rewriting the committed files (even with the same bytes)
# gives them new modification times, and the issuer, which embeds them (issuer/build.rs), would be
# compiled again with everything that links it.
built=$(mktemp -d)
trap 'rm -rf "$built"' EXIT
npx tsc --noEmit
npx vite build --outDir "$built/dist" --emptyOutDir --logLevel warn
if ! diff -r "$built/dist" dist >/dev/null; then
  diff -rq "$built/dist" dist || true
  echo "ui: ui/dist is stale (the committed build differs from the sources): run npm run build in ui/ and commit ui/dist"
  exit 1
fi
unit_rc=0
npx vitest run || unit_rc=$?

cd "$repo"
# The site's own OpenID provider the identity-provider browser tests sign in at.
hack/conformance/oidc-provider/install.sh
# `ichor` is the small launcher users run; it execs `ichor-full` beside it for `ichor dev`.
# ICHOR_PREBUILT_BIN_DIR: a directory where both were built already (hack/test.sh passes the
# test build's), so they are not built again with another feature set.
target_dir=${CARGO_TARGET_DIR:-$repo/target}
if [[ -n ${ICHOR_PREBUILT_BIN_DIR:-} ]]; then
  bin_dir=$ICHOR_PREBUILT_BIN_DIR
  for bin in ichor ichor-full; do
    [[ -x $bin_dir/$bin ]] ||
      { echo "hack/ui/test.sh: $bin_dir/$bin is missing (ICHOR_PREBUILT_BIN_DIR): build it first" >&2; exit 1; }
  done
else
  cargo build --locked -p ichor-cli --bin ichor --bin ichor-full
  bin_dir=$target_dir/debug
fi
shots="$target_dir/ui-screenshots"
rm -rf "$shots"
echo "hack/ui/test.sh: screenshots go to $shots"
walk_rc=0
ICHOR_BIN="$bin_dir/ichor" node ui/e2e/walkthrough-dev.mjs || walk_rc=$?
e2e_rc=0
# No UI_DIST: the e2e tests the UI embedded in the binary.
ICHOR_BIN="$bin_dir/ichor" SCREENSHOT_DIR="$shots" node ui/e2e/run.mjs || e2e_rc=$?
if ((unit_rc != 0)); then
  echo "ui: unit tests (vitest) failed"
  exit 1
fi
if ((walk_rc != 0)); then
  echo "ui: the walkthrough script's checks (ui/e2e/walkthrough-dev.mjs) failed"
  exit 1
fi
exit "$e2e_rc"
