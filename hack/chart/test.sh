#!/usr/bin/env bash
# Chart tests for helm/ichor: renders it with the real Helm engine (PyPI helm-python-sdk, which
# bundles Helm's Go SDK), lints it, validates every object against the Kubernetes 1.34 schemas
# (kubernetes-validate --strict), checks the RBAC and the workload contract, compares the
# rendering with the snapshots in golden/chart/ and checks that bad values are refused.
# See hack/chart/check.py for the list of checks.
#
# Usage: hack/chart/test.sh [--update]   (--update rewrites golden/chart/*.yaml; review, commit)
#
# The two Python packages go into a venv under $ICHOR_BUILD_DIR (default .build), installed once
# (about 75 MB, mostly Helm's shared library) and reused after.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${ICHOR_BUILD_DIR:-$PWD/.build}"
venv="$build/venv"
helm_sdk="helm-python-sdk==0.2.2"
validator="kubernetes-validate==1.37.0"

if ! "$venv/bin/python" -c 'import helm_python, kubernetes_validate, yaml' >/dev/null 2>&1; then
  echo "installing $helm_sdk and $validator into $venv"
  command -v python3 >/dev/null || { echo "hack/chart/test.sh: python3 (with its venv module) is needed" >&2; exit 1; }
  mkdir -p "$build"
  python3 -m venv "$venv" || { echo "hack/chart/test.sh: python3 -m venv $venv failed (is the venv module installed?)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$helm_sdk" "$validator" ||
    { echo "hack/chart/test.sh: pip could not install $helm_sdk and $validator from PyPI" >&2; exit 1; }
fi
exec "$venv/bin/python" hack/chart/check.py "$@"
