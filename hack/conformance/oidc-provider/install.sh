#!/usr/bin/env bash
# Installs the external OpenID provider's npm packages (oidc-provider, pinned by package-lock.json)
# into node_modules/ beside this script, when they are missing or older than the lock. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "hack/conformance/oidc-provider/install.sh: node and npm are required (Node 20 or newer)" >&2
  exit 1
fi
# npm writes node_modules/.package-lock.json on every install: its age is the install's.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "installing the external OpenID provider (npm ci in hack/conformance/oidc-provider)"
  npm ci --no-audit --no-fund --loglevel=error
  touch node_modules/.package-lock.json
fi
echo "external OpenID provider: $PWD (oidc-provider $(node -p 'require("./node_modules/oidc-provider/package.json").version'))"
