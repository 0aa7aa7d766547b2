"""Chart checks of the names the seed (ADR 0094 and its amendments, ADR 0129) gives objects,
labels, values and webhooks, which operators' tooling and Ichor core rely on. Called by check.py.
"""

from __future__ import annotations

from typing import Any, Protocol

# The seed's label of the UI (here: the issuer) Deployment and Service (Amendment "names").
UI_COMPONENT = "ui"
# The issuer pods' component: the Deployment's selector is immutable, so it stays as it was.
POD_COMPONENT = "issuer"
COMPONENT = "app.kubernetes.io/component"


class Checks(Protocol):
    def check(self, ok: bool, message: str) -> bool: ...


def component(obj: dict[str, Any] | None) -> str | None:
    return ((obj or {}).get("metadata") or {}).get("labels", {}).get(COMPONENT)


def selects(selector: str, labels: dict[str, str]) -> bool:
    """Whether an equality-based label selector (`a=b,c=d`) selects an object with `labels`."""
    wanted = [part.split("=", 1) for part in selector.split(",") if part.strip()]
    return bool(wanted) and all(len(w) == 2 and labels.get(w[0].strip()) == w[1].strip() for w in wanted)


def controller_env(by_key: dict[tuple[str, str], dict[str, Any]]) -> dict[str, str | None]:
    controller = by_key.get(("Deployment", "ichor-controller")) or {}
    containers = (((controller.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return {e["name"]: e.get("value") for e in containers[0].get("env", [])}


def check_ui_labels(f: Checks, config: str, by_key: dict[tuple[str, str], dict[str, Any]]) -> None:
    """With users on: the issuer Deployment and Service carry component=ui, the pods and the
    pod selector keep component=issuer, and the controller's selector picks the Service."""
    deployment = by_key.get(("Deployment", "ichor-issuer"))
    service = by_key.get(("Service", "ichor-issuer"))
    f.check(component(deployment) == UI_COMPONENT, f"[{config}] Deployment ichor-issuer lacks {COMPONENT}={UI_COMPONENT}")
    f.check(component(service) == UI_COMPONENT, f"[{config}] Service ichor-issuer lacks {COMPONENT}={UI_COMPONENT}")
    if deployment is not None:
        selector = deployment["spec"]["selector"]["matchLabels"]
        pods = deployment["spec"]["template"]["metadata"]["labels"]
        f.check(
            selector == {"app.kubernetes.io/name": "ichor", COMPONENT: POD_COMPONENT},
            f"[{config}] the issuer's pod selector is {selector}: it is immutable, so a change fails helm upgrade",
        )
        f.check(pods.get(COMPONENT) == POD_COMPONENT, f"[{config}] the issuer's pods are labelled {pods.get(COMPONENT)}, want {POD_COMPONENT} (the selector's)")
    selector = controller_env(by_key).get("ICHOR_CONTROLLER_ISSUER_SERVICE_SELECTOR") or ""
    f.check(
        service is not None and selects(selector, service["metadata"].get("labels", {})),
        f"[{config}] the controller's issuer Service selector {selector!r} does not select Service ichor-issuer",
    )
    others = [k for k, o in by_key.items() if k[0] in ("Service", "Deployment") and component(o) == UI_COMPONENT and k[1] != "ichor-issuer"]
    f.check(not others, f"[{config}] other objects than ichor-issuer carry {COMPONENT}={UI_COMPONENT}: {others}")


# --- the README table --------------------------------------------------------------------------

TABLE_HEADING = "## Names and values that differ from the seed"
USERS_ON = {"ichorUI": {"users": {"enabled": True, "externalURL": "https://ichor.example.com"}}}
SEED_WEBHOOKS = {
    "vichoruser-v1alpha1.kb.io": "ichorusers",
    "vtaloscluster-v1alpha1.kb.io": "talosclusters",
    "vtalosoperation-v1alpha1.kb.io": "talosoperations",
    "vichorinstallation-v1alpha1.kb.io": "ichorinstallations",
}

Objects = dict[tuple[str, str], dict[str, Any]]


class Seed:
    """What a row's check may look at: a rendering of any values (users on unless given), and the
    repository's files (the limits are the issuer's constants, not chart values)."""

    def __init__(self, render: Any, root: Any) -> None:
        self._render = render
        self._root = root
        self._cache: dict[str, Objects] = {}

    def objects(self, values: dict[str, Any] | None = None) -> Objects:
        values = USERS_ON if values is None else values
        key = repr(values)
        if key not in self._cache:
            self._cache[key] = {(o["kind"], o["metadata"]["name"]): o for o in self._render(values)}
        return self._cache[key]

    def source(self, path: str) -> str:
        return (self._root / path).read_text()


def with_service(**kw: Any) -> dict[str, Any]:
    return {"ichorUI": {**USERS_ON["ichorUI"], "service": kw}}


def row_service_name(s: Seed) -> list[str]:
    o = s.objects()
    return [m for ok, m in [
        (("Service", "ichor-ui-service") not in o, "a Service ichor-ui-service is rendered"),
        (component(o.get(("Service", "ichor-issuer"))) == UI_COMPONENT, "Service ichor-issuer lacks component=ui"),
    ] if not ok]


def row_deployment_name(s: Seed) -> list[str]:
    o = s.objects()
    return [m for ok, m in [
        (("Deployment", "ichor-ui") not in o, "a Deployment ichor-ui is rendered"),
        (component(o.get(("Deployment", "ichor-issuer"))) == UI_COMPONENT, "Deployment ichor-issuer lacks component=ui"),
    ] if not ok]


def row_component_label(s: Seed) -> list[str]:
    d = s.objects().get(("Deployment", "ichor-issuer")) or {}
    pods = ((d.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels", {})
    ui = sorted(k for k, v in s.objects().items() if component(v) == UI_COMPONENT)
    wrong = [m for ok, m in [
        (("Deployment", "ichor-issuer") in ui and ("Service", "ichor-issuer") in ui, f"component=ui is on {ui}"),
        (pods.get(COMPONENT) == POD_COMPONENT, f"the issuer pods carry component={pods.get(COMPONENT)}, the table says issuer"),
    ] if not ok]
    return wrong


def row_service_type(s: Seed) -> list[str]:
    wrong = []
    for given, want in ((None, "ClusterIP"), ("NodePort", "NodePort"), ("LoadBalancer", "LoadBalancer")):
        values = USERS_ON if given is None else with_service(type=given)
        svc = s.objects(values).get(("Service", "ichor-issuer")) or {}
        got = (svc.get("spec") or {}).get("type")
        if got != want:
            wrong.append(f"ichorUI.service.type={given} renders Service ichor-issuer of type {got}, want {want}")
    external = s.objects(with_service(loadBalancer={"enabled": True})).get(("Service", "ichor-issuer-external"))
    if (external or {}).get("spec", {}).get("type") != "LoadBalancer":
        wrong.append("ichorUI.service.loadBalancer.enabled renders no LoadBalancer Service ichor-issuer-external")
    return wrong


def row_webhook_names(s: Seed) -> list[str]:
    vwc = s.objects(None).get(("ValidatingWebhookConfiguration", "ichor-identity")) or {}
    got = {w["name"]: r for w in vwc.get("webhooks", []) for rule in w["rules"] for r in rule["resources"]}
    return [] if got == SEED_WEBHOOKS else [f"webhook entries are {got}, want {SEED_WEBHOOKS}"]


def row_users_namespace(s: Seed) -> list[str]:
    vwc = s.objects(None).get(("ValidatingWebhookConfiguration", "ichor-identity")) or {}
    hook = next((w for w in vwc.get("webhooks", []) if w["name"] == "vichoruser-v1alpha1.kb.io"), {})
    conditions = str(hook.get("matchConditions", ""))
    return [m for ok, m in [
        ("namespaceSelector" not in hook and "objectSelector" not in hook, "the IchorUser webhook is limited to some namespaces or objects"),
        ("request.namespace != 'ichor-system' && request.operation == 'CREATE'" in conditions,
         "outside ichor-system a create by an exempt identity is not sent to the webhook"),
    ] if not ok]


def row_ui_service_name(s: Seed) -> list[str]:
    env = controller_env(s.objects())
    return [m for ok, m in [
        (env.get("ICHOR_CONTROLLER_ISSUER_SERVICE_SELECTOR") == f"{COMPONENT}={UI_COMPONENT}", f"the controller's selector is {env.get('ICHOR_CONTROLLER_ISSUER_SERVICE_SELECTOR')}"),
        ("default_value = contract::ISSUER_SERVICE" in s.source("reconcilers/src/run/args.rs")
         and 'pub const ISSUER_SERVICE: &str = "ichor-issuer";' in s.source("renderers/src/contract.rs"),
         "--issuer-service-name no longer defaults to ichor-issuer (contract::ISSUER_SERVICE)"),
    ] if not ok]


def row_controller_flags(s: Seed) -> list[str]:
    env = controller_env(s.objects())
    args = str(s.objects()[("Deployment", "ichor-controller")]["spec"]["template"]["spec"]["containers"][0].get("args", []))
    return [m for ok, m in [
        (env.get("ICHOR_CONTROLLER_REFRESH_LIFETIME") == "12h" and env.get("ICHOR_CONTROLLER_TOKEN_TTL") == "5m", "the controller's lifetimes are not from ichorUI.users"),
        ("user-issuer" not in args and "oidc-refresh-lifetime" not in args, "the controller is given a seed flag it does not have"),
    ] if not ok]


def issuer_env(s: Seed, values: dict[str, Any]) -> dict[str, str | None]:
    d = s.objects(values).get(("Deployment", "ichor-issuer")) or {}
    containers = (((d.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return {e["name"]: e.get("value") for e in containers[0].get("env", [])}


def row_oidc_flags(s: Seed) -> list[str]:
    oidc = {"enabled": True, "issuerURL": "https://idp.example.com", "clientID": "ichor", "kubeClientID": "kubernetes"}
    env = issuer_env(s, {"ichorUI": {**USERS_ON["ichorUI"], "oidc": oidc}})
    return [m for ok, m in [
        (env.get("ICHOR_ISSUER_EXTERNAL_ISSUER_URL") == oidc["issuerURL"]
         and env.get("ICHOR_ISSUER_EXTERNAL_CLIENT_ID") == oidc["clientID"], "ichorUI.oidc does not set the issuer's --external-* flags"),
        (not any("OIDC" in name for name in env), f"the issuer is given an --oidc-* flag: {sorted(env)}"),
    ] if not ok] + constants(s, "issuer/src/cli/flags.rs", ['env = "ICHOR_ISSUER_EXTERNAL_ISSUER_URL"'])


def row_internal_jwks_uri(s: Seed) -> list[str]:
    uri = "https://ichor-issuer.ichor-system.svc:8444/oidc/jwks"
    pinned = issuer_env(s, {"ichorUI": {"users": {**USERS_ON["ichorUI"]["users"], "internalJWKSURI": uri}}})
    return [m for ok, m in [
        ("ICHOR_ISSUER_INTERNAL_JWKS_URI" not in issuer_env(s, USERS_ON), "the default passes --internal-jwks-uri (it must follow the caller's host)"),
        (pinned.get("ICHOR_ISSUER_INTERNAL_JWKS_URI") == uri, "ichorUI.users.internalJWKSURI does not set --internal-jwks-uri"),
    ] if not ok] + constants(s, "issuer/src/cli/flags.rs", ['env = "ICHOR_ISSUER_INTERNAL_JWKS_URI"'])


def constants(s: Seed, path: str, needles: list[str]) -> list[str]:
    text = s.source(path)
    return [f"{path} no longer holds {n!r}: update the table" for n in needles if n not in text]


ROW_CHECKS = {
    "Service `ichor-ui-service`": row_service_name,
    "Deployment `ichor-ui`": row_deployment_name,
    "label `app.kubernetes.io/component=ui`": row_component_label,
    "value `ichorUI.service.type`": row_service_type,
    "webhook `vichoruser-v1alpha1.kb.io`": row_webhook_names,
    "IchorUser namespace `ichor-system`": row_users_namespace,
    "flag `--ui-service-name`": row_ui_service_name,
    "flag `--internal-jwks-uri`": row_internal_jwks_uri,
    "flags `--oidc-*` of ichor-ui": row_oidc_flags,
    "controller flags `--user-issuer`, `--oidc-refresh-lifetime`": row_controller_flags,
    "sign-in back-off per user": lambda s: constants(s, "renderers/src/auth/backoff.rs", [
        "BACKOFF_THRESHOLD: u32 = 5", "BACKOFF_BASE: SignedDuration = SignedDuration::from_secs(1)",
        "BACKOFF_MAX: SignedDuration = SignedDuration::from_mins(15)"]),
    "sign-in limit per source": lambda s: constants(s, "issuer/src/oidc/limits/buckets.rs", [
        "LOGIN_FAILURES: BucketPolicy = BucketPolicy {\n        burst: 10.0,\n        per_second: 1.0 / 6.0,"]),
    "argon2id checks at once": lambda s: constants(s, "issuer/src/oidc/mod.rs", ["HASH_PERMITS: usize = 2"])
    + constants(s, "issuer/src/oidc/devices.rs", ["LANE_PERMITS: usize = 1"]),
}


def table_rows(readme: str) -> dict[str, str]:
    """The table under TABLE_HEADING: first cell -> the whole row."""
    lines = readme.splitlines()
    if TABLE_HEADING not in lines:
        return {}
    rows: dict[str, str] = {}
    for line in lines[lines.index(TABLE_HEADING) + 1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] not in ("seed", "") and not set(cells[0]) <= set("-: "):
            rows[cells[0]] = line
    return rows


def check_table(f: Checks, root: Any, render: Any) -> int:
    """Every row of the README's table has a check here, every check a row, and each check
    holds against the rendered chart (and, for the limits, the issuer's constants)."""
    rows = table_rows((root / "helm" / "ichor" / "README.md").read_text())
    f.check(bool(rows), f"helm/ichor/README.md has no table under {TABLE_HEADING!r}")
    for name in rows:
        f.check(name in ROW_CHECKS, f"README table row {name!r} has no check in hack/chart/seed_names.py")
    seed = Seed(render, root)
    for name, check in ROW_CHECKS.items():
        if f.check(name in rows, f"README table has no row {name!r}"):
            for problem in check(seed):
                f.check(False, f"README table row {name!r}: {problem}")
    return len(rows)
