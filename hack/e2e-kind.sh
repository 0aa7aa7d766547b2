#!/usr/bin/env bash
# End-to-end smoke test of the Ichor identity chart in a kind cluster.
#
# NEEDS A CONTAINER ENGINE: docker (with BuildKit), kind, helm and kubectl. The development
# machines of this project have none (no Docker, Podman or BuildKit), so this script is NOT run
# by hack/test.sh nor CI; run it on a workstation with Docker. Without one of the four tools it
# stops at once, naming what is missing (exit 2).
#
# What it does:
#   1. creates the kind cluster $CLUSTER (kept if it exists; deleted at the end unless KEEP=1);
#   2. builds the images ichor-controller:$TAG and ichor-issuer:$TAG from the repository-root
#      Dockerfile and loads them into kind (SKIP_BUILD=1: use prebuilt images, named by
#      CONTROLLER_IMAGE and ISSUER_IMAGE as repository:tag, already loaded or pullable);
#   3. installs identity's views of the Ichor core CRDs (hack/crds/) and the chart
#      (`helm install ichor helm/ichor -n ichor-system --create-namespace`, which installs
#      helm/ichor/crds/ itself) with the users UI and issuer on, one replica each;
#   4. smoke test:
#      - the controller Deployment becomes Ready (its /readyz: every watcher listed);
#      - the controller creates the Secrets ichor-oidc-signing, ichor-oidc-ca, ichor-oidc-tls and
#        the ConfigMap ichor-oidc-trust;
#      - the issuer becomes Ready and its discovery document is served on the internal listener
#        (port-forward to 8444), verified against the Ichor CA for the Service's DNS name;
#      - an IchorUser created gets its status condition Ready from the controller.
#
# Usage:  hack/e2e-kind.sh            (from anywhere; paths are relative to the repository)
# Env:    CLUSTER (ichor-e2e), TAG (e2e), KEEP (0), SKIP_BUILD (0), CONTROLLER_IMAGE,
#         ISSUER_IMAGE, TIMEOUT (seconds per wait, 240)
set -euo pipefail

cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-ichor-e2e}
TAG=${TAG:-e2e}
KEEP=${KEEP:-0}
SKIP_BUILD=${SKIP_BUILD:-0}
TIMEOUT=${TIMEOUT:-240}
CONTROLLER_IMAGE=${CONTROLLER_IMAGE:-ichor-controller:$TAG}
ISSUER_IMAGE=${ISSUER_IMAGE:-ichor-issuer:$TAG}
NS=ichor-system
EXTERNAL_URL=https://ichor.e2e.invalid

say() { printf '\n==> %s\n' "$*"; }
fail() {
    printf '\nFAIL: %s\n' "$*" >&2
    kubectl -n "$NS" get pods,secrets,configmaps 2>/dev/null >&2 || true
    kubectl -n "$NS" logs deploy/ichor-controller --tail=60 2>/dev/null >&2 || true
    exit 1
}

missing=()
for tool in docker kind helm kubectl curl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    cat >&2 <<EOF
hack/e2e-kind.sh needs a container engine and the kind, helm and kubectl tools.
Missing: ${missing[*]}
This machine cannot run the end-to-end test (the project's development machines have no
container engine). Run it on a workstation with Docker: https://kind.sigs.k8s.io/ for kind.
EOF
    exit 2
fi
if ! docker info >/dev/null 2>&1; then
    echo "hack/e2e-kind.sh: docker is installed but its daemon does not answer (docker info failed)." >&2
    exit 2
fi

PF_PID=
WORK=$(mktemp -d)
cleanup() {
    [[ -n $PF_PID ]] && kill "$PF_PID" 2>/dev/null || true
    rm -rf "$WORK"
    if [[ $KEEP != 1 ]]; then
        kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    else
        echo "kept the kind cluster $CLUSTER (kind delete cluster --name $CLUSTER)"
    fi
}
trap cleanup EXIT

# Waits until "$@" succeeds, at most TIMEOUT seconds.
wait_for() {
    local what=$1
    shift
    local deadline=$((SECONDS + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || fail "timed out after ${TIMEOUT}s waiting for $what"
        sleep 3
    done
    echo "ok: $what"
}

say "kind cluster $CLUSTER"
if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    kind create cluster --name "$CLUSTER" --wait 120s
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

if [[ $SKIP_BUILD != 1 ]]; then
    say "images $CONTROLLER_IMAGE, $ISSUER_IMAGE"
    DOCKER_BUILDKIT=1 docker build --target ichor-controller -t "$CONTROLLER_IMAGE" .
    DOCKER_BUILDKIT=1 docker build --target ichor-issuer -t "$ISSUER_IMAGE" .
fi
kind load docker-image --name "$CLUSTER" "$CONTROLLER_IMAGE" "$ISSUER_IMAGE" ||
    echo "(images not loaded into kind: they must be pullable)"

say "CRDs and chart"
kubectl apply -f hack/crds/
helm upgrade --install ichor helm/ichor -n "$NS" --create-namespace \
    --set controller.image.repository="${CONTROLLER_IMAGE%:*}" \
    --set controller.image.tag="${CONTROLLER_IMAGE##*:}" \
    --set controller.image.pullPolicy=IfNotPresent \
    --set controller.replicas=1 \
    --set controller.logFormat=text \
    --set issuer.image.repository="${ISSUER_IMAGE%:*}" \
    --set issuer.image.tag="${ISSUER_IMAGE##*:}" \
    --set issuer.image.pullPolicy=IfNotPresent \
    --set issuer.replicas=1 \
    --set ichorUI.users.enabled=true \
    --set ichorUI.users.externalURL="$EXTERNAL_URL"

say "smoke test"
wait_for "controller Ready (/readyz)" \
    kubectl -n "$NS" rollout status deploy/ichor-controller --timeout=10s
for s in ichor-oidc-signing ichor-oidc-ca ichor-oidc-tls; do
    wait_for "Secret $s" kubectl -n "$NS" get secret "$s"
done
wait_for "ConfigMap ichor-oidc-trust" kubectl -n "$NS" get configmap ichor-oidc-trust
wait_for "issuer Ready" kubectl -n "$NS" rollout status deploy/ichor-issuer --timeout=10s

kubectl -n "$NS" get secret ichor-oidc-ca -o jsonpath='{.data.tls\.crt}' | base64 -d >"$WORK/ca.crt"
kubectl -n "$NS" port-forward svc/ichor-issuer 18444:8444 >"$WORK/pf.log" 2>&1 &
PF_PID=$!
HOST=ichor-issuer.$NS.svc
discovery() {
    curl -fsS --max-time 5 --cacert "$WORK/ca.crt" --resolve "$HOST:18444:127.0.0.1" \
        "https://$HOST:18444/.well-known/openid-configuration" -o "$WORK/discovery.json"
}
wait_for "issuer discovery over the Ichor CA ($HOST)" discovery
grep -q "$EXTERNAL_URL" "$WORK/discovery.json" ||
    fail "discovery does not name the issuer $EXTERNAL_URL: $(cat "$WORK/discovery.json")"

kubectl apply -f - <<EOF
apiVersion: ichor.maesh.dev/v1alpha1
kind: IchorUser
metadata:
  name: e2e-admin
  namespace: $NS
spec:
  displayName: e2e admin
  roles: [admin]
EOF
ready_condition() {
    kubectl -n "$NS" get ichoruser e2e-admin \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -q .
}
wait_for "IchorUser e2e-admin has its Ready condition" ready_condition
echo "IchorUser e2e-admin conditions:"
kubectl -n "$NS" get ichoruser e2e-admin \
    -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}'

say "PASS: the chart installs, the controller issues the Ichor trust material, the issuer serves discovery, IchorUser status is written"
