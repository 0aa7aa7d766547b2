#!/usr/bin/env python3
"""Chart tests for helm/ichor, run by hack/chart/test.sh in its venv.

Renders the chart with the real Helm engine (helm-python-sdk: Helm's Go SDK behind a C ABI) for
each configuration in CONFIGS, then:

1. lints it (strict: warnings fail; Helm's lint reports `fail` calls only as log lines, so the
   refusals are tested by rendering, below);
2. validates every rendered object, the CRDs included, against the Kubernetes 1.34 OpenAPI
   schemas with kubernetes-validate in strict mode (unknown fields fail). Custom objects
   (group ichor.maesh.dev) would be skipped; the chart renders none;
3. checks the RBAC: no Role or ClusterRole grants `*`, `escalate` or `bind`; `secrets` only in the
   controller's and the issuer's own roles and there exactly the named Secrets below; the verb
   `impersonate` only in the issuer's ClusterRole and there exactly users plus the ichor:
   groups; the user-facing roles (every object of files/ichor-roles.yaml) contain none of them;
   the defaults bind no cluster-admin to ichor:admin;
4. checks the rest of the contract (names, ports, probes, pod security, webhooks, users off);
5. compares the rendered YAML with the committed snapshot golden/chart/<config>.yaml
   (`--update` rewrites the snapshots instead; review the diff and commit it);
6. renders refused configurations and checks each fails with the expected message.

Exit status 0 when everything holds; every failure is printed.
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import helm_python as helm
import kubernetes_validate.utils as kv
import yaml

import seed_names

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "ichor"
ROLES_FILE = CHART / "files" / "ichor-roles.yaml"
# The issuer's flags: every ICHOR_ISSUER_* variable the chart sets must be one they read.
ISSUER_FLAGS = ROOT / "issuer" / "src" / "cli" / "flags.rs"
GOLDEN = ROOT / "golden" / "chart"
NAMESPACE = "ichor-system"
# The namespace of the per-user credentials Secrets: the chart renders only the issuer's and the
# controller's Roles and RoleBindings into it (users on).
CREDENTIALS_NAMESPACE = "ichor-credentials"
RELEASE = "ichor"
KUBE_VERSION = "1.34"

# name -> values file (None: the chart's defaults)
CONFIGS: dict[str, Path | None] = {
    "default": None,
    "users-on": ROOT / "hack" / "chart" / "values-users-on.yaml",
}

# The exact (verb, Secret name) pairs each role may hold; None is "any name" (create only).
SECRET_GRANTS: dict[tuple[str, str], set[tuple[str, str | None]]] = {
    ("Role", "ichor-controller"): {
        *{
            (verb, name)
            for verb in ("get", "list", "watch", "update")
            for name in ("ichor-oidc-signing", "ichor-oidc-ca", "ichor-oidc-tls", "ichor-webhook-tls")
        },
        *{(verb, "ichor-user-credentials") for verb in ("get", "list", "watch", "patch", "delete")},
        ("create", None),
    },
    ("Role", "ichor-issuer"): {
        ("get", "ichor-user-credentials"),
        ("patch", "ichor-user-credentials"),
    },
    # In the credentials namespace, every name (it holds nothing but credentials, which the
    # policy ichor-credentials keeps true): the issuer never lists or watches.
    ("Role", f"{CREDENTIALS_NAMESPACE}/ichor-issuer"): {
        (verb, None) for verb in ("get", "create", "patch", "delete")
    },
    # create: the sweep moves each legacy entry into its user's Secret (never a patch).
    ("Role", f"{CREDENTIALS_NAMESPACE}/ichor-controller"): {
        (verb, None) for verb in ("get", "list", "watch", "delete", "create")
    },
}
# The roles whose secrets rules may lack resourceNames beyond create: those of the namespace
# that holds nothing but credentials.
CREDENTIALS_ROLES = {("Role", f"{CREDENTIALS_NAMESPACE}/ichor-issuer"), ("Role", f"{CREDENTIALS_NAMESPACE}/ichor-controller")}
ISSUER_IMPERSONATION_ROLE = ("ClusterRole", "ichor-issuer")
# The namespaced role that says what a constrained impersonation may be (impersonate-on:...).
ISSUER_ROLE = ("Role", "ichor-issuer")
# The only requests the issuer makes as someone else: the API's IchorUser writes.
IMPERSONATE_ON = ["impersonate-on:user-info:create", "impersonate-on:user-info:update", "impersonate-on:user-info:delete"]


def is_impersonation_verb(verb: str) -> bool:
    """The legacy verb, a constrained mode (impersonate:<mode>) or an action (impersonate-on:...)."""
    return verb == "impersonate" or verb.startswith("impersonate:") or verb.startswith("impersonate-on:")
BUILT_IN_GROUPS = ["ichor:viewer", "ichor:operator", "ichor:admin"]


class Failures:
    """Collects failed checks so one run reports all of them."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def check(self, ok: bool, message: str) -> bool:
        if not ok:
            self.items.append(message)
        return ok


# --- rendering -------------------------------------------------------------------------------


def load_values(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    loaded = yaml.safe_load(path.read_text())
    return loaded if isinstance(loaded, dict) else {}


def render(chart_dir: Path, values: dict[str, Any] | None, namespace: str = NAMESPACE) -> str:
    """The chart as `helm template --include-crds` prints it: one `# Source:` per document."""
    with helm.Chart.load(chart_dir) as chart:
        manifests = chart.render(values, name=RELEASE, namespace=namespace, is_install=True)
        sources = [(crd["filename"], crd["data"]) for crd in chart.crds]
    sources += sorted((path, text) for path, text in manifests.items() if not path.endswith("NOTES.txt"))
    out: list[str] = []
    for path, text in sources:
        for doc in split_documents(text):
            out.append(f"---\n# Source: {path}\n{doc}\n")
    return "".join(out)


def split_documents(text: str) -> list[str]:
    """Documents of a YAML stream that hold an object (comment-only ones are dropped)."""
    docs: list[str] = []
    current: list[str] = []
    for line in text.splitlines() + ["---"]:
        if line.rstrip() == "---":
            doc = "\n".join(current).strip("\n")
            if doc.strip() and yaml.safe_load(doc) is not None:
                docs.append(doc)
            current = []
        else:
            current.append(line)
    return docs


def objects_of(rendered: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(rendered) if o is not None]


def key(obj: dict[str, Any]) -> tuple[str, str]:
    """Kind and name; `namespace/name` for an object outside ichor-system (a Role of the
    credentials namespace shares its name with one of ichor-system)."""
    ns = obj["metadata"].get("namespace")
    name = obj["metadata"]["name"]
    return (obj["kind"], name if ns in (None, NAMESPACE) else f"{ns}/{name}")


# --- checks ----------------------------------------------------------------------------------


def check_lint(f: Failures, config: str, values: dict[str, Any] | None) -> None:
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}.0")
    for message in report.get("messages", []):
        # 1 = info ("icon is recommended"); 2 = warning and 3 = error fail in strict mode.
        f.check(message["severity"] <= 1, f"[{config}] helm lint: {message['path']}: {message['error']}")
    for error in report.get("errors") or []:
        f.check(False, f"[{config}] helm lint: {error}")


def check_schemas(f: Failures, config: str, objects: list[dict[str, Any]]) -> int:
    validated = 0
    for obj in objects:
        name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if str(obj.get("apiVersion", "")).startswith("ichor.maesh.dev/"):
            continue  # a custom object: its CRD's schema applies, not Kubernetes'
        try:
            kv.validate(obj, KUBE_VERSION, strict=True)
            validated += 1
        except kv.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            f.check(False, f"[{config}] {name} is not a valid Kubernetes {KUBE_VERSION} object: {path}: {e.message}")
        except kv.SchemaNotFoundError as e:
            f.check(False, f"[{config}] {name}: {e.message}")
    return validated


def role_grants(rules: list[dict[str, Any]], resource: str) -> set[tuple[str, str | None]]:
    """(verb, name) pairs a role grants on core `resource`; name None is every name."""
    grants: set[tuple[str, str | None]] = set()
    for rule in rules:
        if "" not in rule.get("apiGroups", []) or resource not in rule.get("resources", []):
            continue
        names = rule.get("resourceNames") or [None]
        grants |= {(verb, name) for verb in rule.get("verbs", []) for name in names}
    return grants


def user_facing_objects() -> list[tuple[str, str]]:
    """Kind and name of every object of files/ichor-roles.yaml (the user-facing roles)."""
    docs = [d for d in yaml.safe_load_all(ROLES_FILE.read_text()) if d]
    return [key(d) for d in docs]


def check_rbac(f: Failures, config: str, objects: list[dict[str, Any]], values: dict[str, Any]) -> None:
    by_key = {key(o): o for o in objects}
    roles = {k: o for k, o in by_key.items() if k[0] in ("Role", "ClusterRole")}
    bindings = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    users_on = values["ichorUI"]["users"]["enabled"]

    # The user-facing roles are exactly the objects of the one source file.
    source = user_facing_objects()
    for k in source:
        f.check(k in by_key, f"[{config}] {k[0]} {k[1]} of files/ichor-roles.yaml is not rendered")
    for name, group in zip(["ichor-viewer", "ichor-operator", "ichor-admin"], BUILT_IN_GROUPS):
        f.check(("ClusterRole", name) in source, f"files/ichor-roles.yaml has no ClusterRole {name}")
        binding = by_key.get(("ClusterRoleBinding", name), {})
        f.check(
            binding.get("roleRef", {}).get("name") == name
            and {"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"} in binding.get("subjects", []),
            f"[{config}] ClusterRoleBinding {name} does not bind ClusterRole {name} to Group {group}",
        )
    user_facing = {k for k in source if k[0] in ("Role", "ClusterRole")}

    for k, role in roles.items():
        label = f"[{config}] {k[0]} {k[1]}"
        rules = role.get("rules") or []
        f.check("aggregationRule" not in role, f"{label} aggregates other roles; nothing here may")
        for rule in rules:
            every = [*rule.get("apiGroups", []), *rule.get("resources", []), *rule.get("verbs", [])]
            every += [*rule.get("resourceNames", []), *rule.get("nonResourceURLs", [])]
            f.check(not any("*" in item for item in every), f"{label} has a wildcard: {rule}")
            f.check(not {"escalate", "bind"} & set(rule.get("verbs", [])), f"{label} grants escalate or bind: {rule}")
            mentions_secrets = "secrets" in rule.get("resources", [])
            impersonates = any(is_impersonation_verb(v) for v in rule.get("verbs", []))
            if k in user_facing:
                f.check(not mentions_secrets, f"{label} (user-facing) mentions secrets: {rule}")
                f.check(not impersonates, f"{label} (user-facing) grants impersonate: {rule}")
            if mentions_secrets:
                f.check(k in SECRET_GRANTS, f"{label} mentions secrets; only the controller and issuer roles may")
                names = rule.get("resourceNames")
                f.check(
                    bool(names) or rule.get("verbs") == ["create"] or k in CREDENTIALS_ROLES,
                    f"{label} has a secrets rule without resourceNames that is not create-only: {rule}",
                )
            if impersonates:
                f.check(
                    k == ISSUER_IMPERSONATION_ROLE or (k == ISSUER_ROLE and all(v in IMPERSONATE_ON for v in rule["verbs"])),
                    f"{label} grants impersonation; only the issuer's ClusterRole (and its Role the IchorUser writes) may",
                )
        if k in SECRET_GRANTS:
            got = role_grants(rules, "secrets")
            want = set(SECRET_GRANTS[k])
            if k == ("Role", "ichor-controller"):
                # The rollout reads the Talos credentials of exactly the clusters it is given.
                clusters = (((values or {}).get("controller") or {}).get("rollout") or {}).get("clusters") or []
                want |= {("get", f"{c}-talosconfig") for c in clusters}
            f.check(got == want, f"{label} secrets grants differ: extra {sorted(got - want, key=str)}, missing {sorted(want - got, key=str)}")

    # Impersonation: users (no names can be listed), and groups exactly ichor:<role>.
    issuer_role = roles.get(ISSUER_IMPERSONATION_ROLE)
    f.check((issuer_role is not None) == users_on, f"[{config}] ClusterRole ichor-issuer rendered = {issuer_role is not None}, users on = {users_on}")
    if issuer_role is not None:
        custom = [f"ichor:{r}" for r in values["ichorUI"]["users"].get("customRoles", [])]
        oidc = values["ichorUI"].get("oidc") or {}
        if oidc.get("enabled"):
            # The external provider's listed groups, under its prefix; never a system: group.
            custom += [f"{oidc['groupsPrefix']}{g}" for g in oidc.get("impersonableGroups", [])]
        f.check(not any(g.startswith("system:") for g in custom), f"[{config}] ichor-issuer may impersonate a system: group: {custom}")
        legacy = bool(values["ichorUI"]["users"].get("legacyImpersonation"))
        verb, group = ("impersonate", "") if legacy else ("impersonate:user-info", "authentication.k8s.io")
        imp = [r for r in issuer_role["rules"] if any(is_impersonation_verb(v) for v in r["verbs"])]
        targets = sorted((res, tuple(r.get("resourceNames") or ())) for r in imp for res in r["resources"])
        want = sorted([("users", ()), ("groups", tuple(BUILT_IN_GROUPS + custom))])
        f.check(targets == want, f"[{config}] ichor-issuer impersonation is {targets}, want {want}")
        f.check(
            all(r["verbs"] == [verb] and r["apiGroups"] == [group] for r in imp),
            f"[{config}] ichor-issuer impersonation rules are not exactly {verb!r} in {group!r}: {imp}",
        )
        # Constrained: what an impersonated request may be is the API's IchorUser writes, in the
        # namespace only; legacy: no such rule (the legacy verb allows any request).
        on = [r for r in (roles.get(ISSUER_ROLE) or {}).get("rules", []) if any(is_impersonation_verb(v) for v in r["verbs"])]
        want_on = [] if legacy else [{"apiGroups": ["ichor.maesh.dev"], "resources": ["ichorusers"], "verbs": IMPERSONATE_ON}]
        f.check(on == want_on, f"[{config}] Role ichor-issuer impersonate-on rules are {on}, want {want_on}")

    # Bindings: every role they name exists (or is a well-known one), and cluster-admin for
    # ichor:admin only when asked for.
    admin_roles = set(values["ichorUI"]["users"]["clusterAdminRoles"])
    bound_to_admin: set[str] = set()
    for b in bindings:
        ref = b["roleRef"]
        subjects = b.get("subjects", [])
        if any(s.get("kind") == "Group" and s.get("name") == "ichor:admin" for s in subjects):
            bound_to_admin.add(ref["name"])
        ns = b["metadata"].get("namespace")
        ref_key = (ref["kind"], ref["name"] if ref["kind"] == "ClusterRole" or ns == NAMESPACE else f"{ns}/{ref['name']}")
        if ref["name"] not in admin_roles:
            f.check(ref_key in roles, f"[{config}] {b['kind']} {b['metadata']['name']} refers to {ref['kind']} {ref['name']}, which the chart does not render")
        for s in subjects:
            if s.get("kind") == "ServiceAccount":
                f.check(s.get("namespace") == NAMESPACE and s.get("name") == b["metadata"]["name"], f"[{config}] {b['kind']} {b['metadata']['name']} binds ServiceAccount {s}")
    from_source = {
        d["roleRef"]["name"]
        for d in yaml.safe_load_all(ROLES_FILE.read_text())
        if d and d["kind"].endswith("Binding")
        and any(s.get("kind") == "Group" and s.get("name") == "ichor:admin" for s in d.get("subjects", []))
    }
    f.check(
        bound_to_admin == from_source | admin_roles,
        f"[{config}] roles bound to ichor:admin are {sorted(bound_to_admin)}",
    )
    if config == "default":
        # Whatever values.yaml says: a default install binds nothing more to ichor:admin than
        # the source file does, and cluster-admin to nobody.
        f.check(bound_to_admin == from_source, f"[{config}] the defaults bind {sorted(bound_to_admin - from_source)} to ichor:admin")
        f.check(
            not any(b["roleRef"]["name"] == "cluster-admin" for b in bindings),
            f"[{config}] the defaults bind cluster-admin",
        )
    else:
        f.check("cluster-admin" not in admin_roles or "cluster-admin" in bound_to_admin, f"[{config}] clusterAdminRoles [cluster-admin] renders no binding")


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def check_workloads(f: Failures, config: str, objects: list[dict[str, Any]], values: dict[str, Any]) -> None:
    by_key = {key(o): o for o in objects}
    users_on = values["ichorUI"]["users"]["enabled"]

    for o in objects:
        ns = o["metadata"].get("namespace")
        f.check(
            ns in (None, NAMESPACE) or (ns == CREDENTIALS_NAMESPACE and o["kind"] in ("Role", "RoleBinding")),
            f"[{config}] {key(o)} is outside {NAMESPACE} (only Roles and RoleBindings may be in {CREDENTIALS_NAMESPACE})",
        )
    in_credentials = sorted(key(o) for o in objects if o["metadata"].get("namespace") == CREDENTIALS_NAMESPACE)
    want_credentials = sorted(
        (kind, f"{CREDENTIALS_NAMESPACE}/{name}") for kind in ("Role", "RoleBinding") for name in ("ichor-issuer", "ichor-controller")
    ) if users_on else []
    f.check(in_credentials == want_credentials, f"[{config}] objects in {CREDENTIALS_NAMESPACE} are {in_credentials}, want {want_credentials}")

    issuer_kinds = [k for k, o in by_key.items() if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") in ("ui", "issuer")]
    if not users_on:
        f.check(not issuer_kinds, f"[{config}] users are off but issuer objects are rendered: {issuer_kinds}")
        f.check(("Service", "ichor-issuer-external") not in by_key, f"[{config}] users off renders the external Service")

    deployments = [o for o in objects if o["kind"] == "Deployment"]
    f.check(
        sorted(d["metadata"]["name"] for d in deployments) == (["ichor-controller", "ichor-issuer"] if users_on else ["ichor-controller"]),
        f"[{config}] Deployments are {[d['metadata']['name'] for d in deployments]}",
    )
    for d in deployments:
        label = f"[{config}] Deployment {d['metadata']['name']}"
        pod = d["spec"]["template"]["spec"]
        psc = pod.get("securityContext", {})
        f.check(psc.get("runAsNonRoot") is True, f"{label}: pod runAsNonRoot is not true")
        f.check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{label}: pod seccomp is not RuntimeDefault")
        f.check(d["spec"]["replicas"] == 2, f"{label}: replicas {d['spec']['replicas']}, want 2")
        for c in containers(d):
            sc = c.get("securityContext", {})
            f.check(sc.get("allowPrivilegeEscalation") is False, f"{label}/{c['name']}: allowPrivilegeEscalation is not false")
            f.check(sc.get("readOnlyRootFilesystem") is True, f"{label}/{c['name']}: readOnlyRootFilesystem is not true")
            f.check(sc.get("runAsNonRoot") is True, f"{label}/{c['name']}: runAsNonRoot is not true")
            f.check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{label}/{c['name']}: capabilities are not drop [ALL]")
            f.check(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{label}/{c['name']}: seccomp is not RuntimeDefault")
            f.check("livenessProbe" in c and "readinessProbe" in c, f"{label}/{c['name']}: probes missing")
            for m in c.get("volumeMounts", []):
                if m["name"] != "tmp":
                    f.check(m.get("readOnly") is True, f"{label}/{c['name']}: mount {m['name']} is not read-only")

    controller = by_key.get(("Deployment", "ichor-controller"))
    if f.check(controller is not None, f"[{config}] no Deployment ichor-controller"):
        c = controller["spec"]["template"]["spec"]["containers"][0]
        args = c.get("args", [])
        f.check("--leader-elect" in args, f"[{config}] the controller is not started with --leader-elect")
        port = args[args.index("--webhook-port") + 1] if "--webhook-port" in args[:-1] else None
        f.check(port == "9443", f"[{config}] the controller is not started with --webhook-port 9443")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        f.check(ports == {"webhook": 9443, "http-metrics": 8080}, f"[{config}] controller ports {ports}")
        f.check(c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"[{config}] controller probes")
        vols = {v["name"]: v for v in controller["spec"]["template"]["spec"]["volumes"]}
        f.check(vols.get("webhook-tls", {}).get("secret", {}).get("secretName") == "ichor-webhook-tls", f"[{config}] the controller does not mount ichor-webhook-tls")

    issuer = by_key.get(("Deployment", "ichor-issuer"))
    if users_on and f.check(issuer is not None, f"[{config}] users on but no Deployment ichor-issuer"):
        spec = issuer["spec"]["template"]["spec"]
        c = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        u = values["ichorUI"]["users"]
        f.check(env.get("ICHOR_ISSUER_STORE") == "kube", f"[{config}] issuer store is {env.get('ICHOR_ISSUER_STORE')}")
        annotations = issuer["spec"]["template"]["metadata"].get("annotations") or {}
        f.check(
            annotations.get("ichor.maesh.dev/credentials-layouts") == "legacy,per-user",
            f"[{config}] the issuer's pods do not say they read and write both credentials layouts: {annotations}",
        )
        f.check(env.get("ICHOR_ISSUER_EXTERNAL_URL") == u["externalURL"], f"[{config}] issuer external URL")
        f.check(env.get("ICHOR_ISSUER_TOKEN_TTL") == u["tokenTTL"] and env.get("ICHOR_ISSUER_REFRESH_LIFETIME") == u["refreshLifetime"], f"[{config}] issuer lifetimes")
        f.check(env.get("ICHOR_ISSUER_KEYS_FILE") == "/var/run/ichor/oidc-signing/keys.json" and env.get("ICHOR_ISSUER_ICHOR_TLS_DIR") == "/var/run/ichor/oidc-tls", f"[{config}] issuer mount paths")
        f.check(all(k.startswith("ICHOR_ISSUER_") for k in env), f"[{config}] issuer env not ICHOR_ISSUER_*: {sorted(env)}")
        unknown = sorted(k for k in env if f'env = "{k}"' not in ISSUER_FLAGS.read_text())
        f.check(not unknown, f"[{config}] the issuer is given variables no flag of {ISSUER_FLAGS.relative_to(ROOT)} reads: {unknown}")
        writes = values["issuer"]["familyWritesPerMinute"]
        f.check(
            env.get("ICHOR_ISSUER_FAMILY_WRITES_PER_MINUTE") == str(writes),
            f"[{config}] the issuer's write cap is {env.get('ICHOR_ISSUER_FAMILY_WRITES_PER_MINUTE')!r}, want issuer.familyWritesPerMinute {writes}",
        )
        vols = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
        f.check({"oidc-signing": "ichor-oidc-signing", "oidc-tls": "ichor-oidc-tls"}.items() <= vols.items(), f"[{config}] issuer volumes {vols}")
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        f.check(mounts.get("oidc-signing") == "/var/run/ichor/oidc-signing" and mounts.get("oidc-tls") == "/var/run/ichor/oidc-tls", f"[{config}] issuer mounts {mounts}")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        f.check(ports == {"https": 8443, "https-internal": 8444, "http-metrics": 9090}, f"[{config}] issuer ports {ports}")
        o = values["ichorUI"].get("oidc") or {}
        f.check(
            env.get("ICHOR_ISSUER_EXTERNAL_ISSUER_URL") == (o["issuerURL"] if o.get("enabled") else None)
            and env.get("ICHOR_ISSUER_EXTERNAL_CLIENT_ID") == (o["clientID"] if o.get("enabled") else None)
            and ("ICHOR_ISSUER_EXTERNAL_CA_FILE" in env) == bool(o.get("enabled") and o.get("certificateAuthority")),
            f"[{config}] the issuer's external-provider flags do not follow ichorUI.oidc",
        )
        f.check(env.get("ICHOR_ISSUER_METRICS_LISTEN") == "0.0.0.0:9090", f"[{config}] the issuer's metrics listener is {env.get('ICHOR_ISSUER_METRICS_LISTEN')}, want 0.0.0.0:9090 (its http-metrics port)")
        ready = c["readinessProbe"].get("httpGet", {})
        f.check(ready.get("path") == "/readyz" and ready.get("scheme") == "HTTPS" and ready.get("port") == "https", f"[{config}] issuer readiness probe {ready}")
        f.check("podAntiAffinity" in spec.get("affinity", {}), f"[{config}] issuer has no pod anti-affinity")
        pdb = by_key.get(("PodDisruptionBudget", "ichor-issuer"))
        f.check(pdb is not None and pdb["spec"]["selector"]["matchLabels"] == issuer["spec"]["selector"]["matchLabels"], f"[{config}] issuer PDB missing or selecting other pods")
        svc = by_key.get(("Service", "ichor-issuer"))
        if f.check(svc is not None, f"[{config}] no Service ichor-issuer"):
            want_type = (values["ichorUI"].get("service") or {}).get("type") or "ClusterIP"
            f.check(svc["spec"]["type"] == want_type, f"[{config}] Service ichor-issuer is {svc['spec']['type']}, want {want_type} (ichorUI.service.type)")
            f.check(sorted(p["port"] for p in svc["spec"]["ports"]) == [8443, 8444], f"[{config}] Service ichor-issuer ports")
        issuer_services = [o for o in objects if o["kind"] == "Service" and o["metadata"]["labels"].get("app.kubernetes.io/component") == "ui"]
        f.check(len(issuer_services) == 1, f"[{config}] {len(issuer_services)} Services carry component=ui; the controller needs exactly one")
        seed_names.check_ui_labels(f, config, by_key)

    # The admission webhooks.
    vwc = by_key.get(("ValidatingWebhookConfiguration", "ichor-identity"))
    if f.check(vwc is not None, f"[{config}] no ValidatingWebhookConfiguration ichor-identity"):
        want = {
            "ichorusers": (["CREATE", "UPDATE", "DELETE"], "/validate/ichorusers"),
            "talosclusters": (["CREATE", "UPDATE"], "/validate/talosclusters"),
            "talosoperations": (["CREATE", "UPDATE"], "/validate/talosoperations"),
            "ichorinstallations": (["CREATE", "UPDATE", "DELETE"], "/validate/ichorinstallations"),
        }
        got = {}
        for w in vwc["webhooks"]:
            label = f"[{config}] webhook {w['name']}"
            f.check(w["failurePolicy"] == "Fail" and w["timeoutSeconds"] == 5 and w["sideEffects"] == "None", f"{label}: policy/timeout/side effects")
            f.check(w["admissionReviewVersions"] == ["v1"], f"{label}: admissionReviewVersions")
            f.check("caBundle" not in w["clientConfig"], f"{label}: caBundle is rendered (the controller keeps it)")
            svc = w["clientConfig"]["service"]
            f.check((svc["name"], svc["namespace"], svc.get("port")) == ("ichor-controller-webhook", NAMESPACE, 443), f"{label}: service {svc}")
            for rule in w["rules"]:
                for r in rule["resources"]:
                    got[r] = (rule["operations"], svc.get("path"))
            # Exemptions name identities; a prefix such as system: would exempt every ServiceAccount.
            # A named identity is exempt only with system: groups alone (an impersonated one carries
            # ichor: groups), the rule of renderers' is_exempt_from_last_admin_rule.
            conditions = str(w.get("matchConditions", ""))
            f.check("username.startsWith" not in conditions, f"{label}: a match condition exempts a name prefix: {conditions}")
            if w["name"] == "vichoruser-v1alpha1.kb.io":
                f.check("groups.all(g, g.startsWith('system:'))" in conditions, f"{label}: an exempt name is exempt with any group: {conditions}")
        f.check(got == want, f"[{config}] webhooks {got}, want {want}")
        ws = by_key.get(("Service", "ichor-controller-webhook"))
        f.check(ws is not None and ws["spec"]["ports"][0]["port"] == 443 and ws["spec"]["ports"][0]["targetPort"] == "webhook", f"[{config}] Service ichor-controller-webhook is not 443 -> webhook (9443)")

    # What RBAC cannot name: the controller's Secret creates, the Ichor roles' port-forwards.
    for policy, needle in (("ichor-controller-secrets", "system:serviceaccount:ichor-system:ichor-controller"),
                           ("ichor-user-portforward", "ichor:viewer")):
        vap = by_key.get(("ValidatingAdmissionPolicy", policy))
        binding = by_key.get(("ValidatingAdmissionPolicyBinding", policy))
        if f.check(vap is not None and binding is not None, f"[{config}] no ValidatingAdmissionPolicy {policy} with its binding"):
            f.check(vap["spec"]["failurePolicy"] == "Fail" and needle in str(vap["spec"]["matchConditions"]), f"[{config}] {policy} does not match {needle} or fails open")
            f.check(binding["spec"]["policyName"] == policy and binding["spec"]["validationActions"] == ["Deny"], f"[{config}] {policy}'s binding does not deny")
    # The credentials namespace holds nothing but credentials: every create and update of a
    # Secret there, matched by the namespace's name, failing closed, by the issuer or the
    # controller, of the credentials type, name, label and one key.
    vap = by_key.get(("ValidatingAdmissionPolicy", "ichor-credentials"))
    binding = by_key.get(("ValidatingAdmissionPolicyBinding", "ichor-credentials"))
    if f.check(vap is not None and binding is not None, f"[{config}] no ValidatingAdmissionPolicy ichor-credentials with its binding"):
        spec = vap["spec"]
        selector = {"matchLabels": {"kubernetes.io/metadata.name": CREDENTIALS_NAMESPACE}}
        f.check(spec["failurePolicy"] == "Fail", f"[{config}] ichor-credentials fails open")
        f.check(spec["matchConstraints"].get("namespaceSelector") == selector, f"[{config}] ichor-credentials matches {spec['matchConstraints'].get('namespaceSelector')}")
        f.check(
            spec["matchConstraints"]["resourceRules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["secrets"]}],
            f"[{config}] ichor-credentials does not match every create and update of a Secret",
        )
        f.check("matchConditions" not in spec, f"[{config}] ichor-credentials exempts requests by a match condition")
        validations = " ".join(v["expression"] for v in spec["validations"])
        for needle in ("system:serviceaccount:ichor-system:ichor-issuer", "system:serviceaccount:ichor-system:ichor-controller",
                       "'ichor.maesh.dev/user-credentials'", "'ichor.maesh.dev/user'", "'entry'", "size() <= 63"):
            f.check(needle in validations, f"[{config}] ichor-credentials does not check {needle}")
        f.check(binding["spec"]["policyName"] == "ichor-credentials" and binding["spec"]["validationActions"] == ["Deny"], f"[{config}] ichor-credentials's binding does not deny")
        f.check(binding["spec"].get("matchResources", {}).get("namespaceSelector") == selector, f"[{config}] ichor-credentials's binding is not the namespace's")
    # The NetworkPolicies (on by default): the controller's pods, and the issuer's with users on.
    want_np = {"ichor-controller"} | ({"ichor-issuer"} if ("Deployment", "ichor-issuer") in by_key else set())
    got_np = {name for (kind, name) in by_key if kind == "NetworkPolicy"}
    f.check(got_np == want_np, f"[{config}] NetworkPolicies {sorted(got_np)}, want {sorted(want_np)}")


def check_snapshot(f: Failures, config: str, rendered: str, update: bool) -> None:
    path = GOLDEN / f"{config}.yaml"
    header = (
        f"# Snapshot of `helm template` of helm/ichor, configuration {config!r} (hack/chart/check.py).\n"
        "# Do not edit: `hack/chart/test.sh --update` rewrites it; review the diff and commit it.\n"
    )
    text = header + rendered
    if update:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"updated {path.relative_to(ROOT)}")
        return
    if not f.check(path.exists(), f"[{config}] snapshot {path.relative_to(ROOT)} is missing (run hack/chart/test.sh --update)"):
        return
    old = path.read_text()
    if old != text:
        diff = "".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(path.relative_to(ROOT)), "rendered", n=2))
        f.check(False, f"[{config}] the rendered chart differs from {path.relative_to(ROOT)} (hack/chart/test.sh --update, then review):\n{diff}")


# --- refusals --------------------------------------------------------------------------------


def users(**kw: Any) -> dict[str, Any]:
    return {"ichorUI": {"users": {"enabled": True, "externalURL": "https://ichor.example.com", **kw}}}


def oidc(**kw: Any) -> dict[str, Any]:
    values = users()
    values["ichorUI"]["oidc"] = {"enabled": True, "issuerURL": "https://idp.example.com", "clientID": "ichor", "kubeClientID": "kubernetes", **kw}
    return values


def family_writes(n: Any) -> dict[str, Any]:
    return {**users(), "issuer": {"familyWritesPerMinute": n}}


def service(**kw: Any) -> dict[str, Any]:
    values = users()
    values["ichorUI"]["service"] = kw
    return values


REFUSALS: list[tuple[str, dict[str, Any], str, str]] = [
    # (what, values, namespace, a piece of the expected error)
    ("users on without externalURL", users(externalURL=""), NAMESPACE, "externalURL"),
    ("an http externalURL", users(externalURL="http://ichor.example.com"), NAMESPACE, "externalURL"),
    ("an externalURL with a query", users(externalURL="https://ichor.example.com/?a=b"), NAMESPACE, "externalURL"),
    ("a typo in a top-level key", {"controler": {"replicas": 3}}, NAMESPACE, "additional properties 'controler' not allowed"),
    ("a typo in a nested key", {"ichorUI": {"users": {"enable": True}}}, NAMESPACE, "additional properties 'enable' not allowed"),
    ("a tokenTTL over 15m", users(tokenTTL="30m"), NAMESPACE, "ichorUI.users.tokenTTL \"30m\" is out of range"),
    ("a tokenTTL under 1m", users(tokenTTL="59s"), NAMESPACE, "ichorUI.users.tokenTTL \"59s\" is out of range"),
    ("a tokenTTL of 0s", users(tokenTTL="0s"), NAMESPACE, "tokenTTL"),
    ("a refreshLifetime over 720h", users(refreshLifetime="721h"), NAMESPACE, "ichorUI.users.refreshLifetime \"721h\" is out of range"),
    ("a refreshLifetime without a unit", users(refreshLifetime="12"), NAMESPACE, "refreshLifetime"),
    ("a kubeconfigCluster that is no object name", users(kubeconfigCluster="Prod_1"), NAMESPACE, "kubeconfigCluster"),
    ("a custom role named like a built-in one", users(customRoles=["admin"]), NAMESPACE, "customRoles"),
    ("a clusterAdminRoles entry twice", users(clusterAdminRoles=["cluster-admin", "cluster-admin"]), NAMESPACE, "clusterAdminRoles"),
    ("an external provider without users", {"ichorUI": {"oidc": {"enabled": True, "issuerURL": "https://idp.example.com", "clientID": "ichor", "kubeClientID": "kubernetes"}}}, NAMESPACE, "ichorUI.oidc.enabled needs ichorUI.users.enabled"),
    ("an external provider over http", oidc(issuerURL="http://idp.example.com"), NAMESPACE, "issuerURL"),
    ("an external provider without a client", oidc(clientID=""), NAMESPACE, "clientID"),
    ("an external provider without a kube client", oidc(kubeClientID=""), NAMESPACE, "kubeClientID"),
    ("an external provider whose kube client is the UI's", oidc(kubeClientID="ichor"), NAMESPACE, "another client than clientID"),
    ("an external prefix under ichor:", oidc(usernamePrefix="ichor:"), NAMESPACE, "usernamePrefix"),
    ("an external groups prefix under system:", oidc(groupsPrefix="system:"), NAMESPACE, "groupsPrefix"),
    ("an empty external prefix", oidc(usernamePrefix=""), NAMESPACE, "usernamePrefix"),
    ("an external prefix a name completes to ichor:", oidc(groupsPrefix="ichor"), NAMESPACE, "groupsPrefix"),
    ("an external prefix a name completes to system:", oidc(usernamePrefix="sys"), NAMESPACE, "usernamePrefix"),
    ("a private key as the provider's CA", oidc(certificateAuthority="-----BEGIN CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\n"), NAMESPACE, "certificateAuthority"),
    ("a Service type the chart does not allow", service(type="ExternalName"), NAMESPACE, "value must be one of"),
    ("an http internalJWKSURI", users(internalJWKSURI="http://10.96.0.12:8444/oidc/jwks"), NAMESPACE, "internalJWKSURI"),
    ("one replica count of zero", {"issuer": {"replicas": 0}}, NAMESPACE, "replicas"),
    # The issuer reads a u32 and crash-loops on anything else; past 1200 a minute the per-family
    # ceiling of 20 refreshes a second binds first.
    *[(f"a familyWritesPerMinute of {n!r}", family_writes(n), NAMESPACE, "familyWritesPerMinute")
      for n in (-1, 1201, 2.5, "6")],
    # The controller takes a publish lead of 1m to 60m only and crash-loops on any other.
    *[(f"a publishLead of {lead}", {"controller": {"keys": {"publishLead": lead}}}, NAMESPACE, "publishLead")
      for lead in ("30s", "0m", "61m", "90m", "1h", "10")],
    ("another namespace", {}, "default", "Ichor installs into the namespace ichor-system only"),
]

# The template refusals behind the schema (for `--skip-schema-validation`): rendered from a copy
# of the chart without values.schema.json.
TEMPLATE_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("users on without externalURL", users(externalURL=""), "ichorUI.users.externalURL is required"),
    ("an http externalURL", users(externalURL="http://ichor.example.com"), "must use https"),
    ("a tokenTTL in hours", users(tokenTTL="1h"), "tokenTTL \"1h\" is out of range"),
    ("an external provider over http", oidc(issuerURL="http://idp.example.com"), "ichorUI.oidc.issuerURL \"http://idp.example.com\" must be"),
    ("an external prefix under system:", oidc(groupsPrefix="system:"), "prefix \"system:\" is not allowed"),
    ("an external prefix a name completes to ichor:", oidc(groupsPrefix="ichor"), "prefix \"ichor\" is not allowed"),
    ("an external prefix a name completes to system:", oidc(usernamePrefix="syst"), "prefix \"syst\" is not allowed"),
    ("an external provider without a kube client", oidc(kubeClientID=""), "ichorUI.oidc.kubeClientID is required"),
    ("an external provider that is Ichor's issuer", oidc(issuerURL="https://ichor.example.com/"), "is Ichor's own issuer"),
    ("a Service type the chart does not allow", service(type="ExternalName"), "ichorUI.service.type \"ExternalName\" is not allowed"),
    *[(f"a familyWritesPerMinute of {n!r}", family_writes(n), f"issuer.familyWritesPerMinute \"{n}\" is out of range")
      for n in (-1, 1201, 2.5, "six")],
]


def expect_refusal(f: Failures, what: str, run: Callable[[], str], needle: str) -> None:
    try:
        run()
    except helm.HelmError as e:
        f.check(needle in str(e), f"refusal of {what}: the error does not mention {needle!r}: {e}")
        return
    f.check(False, f"{what} was accepted; it must be refused")


# publishLead values at the edges of what the schema takes: each renders, and reaches the
# controller as ICHOR_CONTROLLER_KEY_PUBLISH_LEAD unchanged.
ACCEPTED_PUBLISH_LEADS = ("1m", "10m", "60m")

# issuer.familyWritesPerMinute at the edges, and unset (a release upgraded with --reuse-values
# from a chart without the key): what reaches the issuer. 0 stays 0 (no cap), never the default.
ACCEPTED_FAMILY_WRITES: tuple[tuple[Any, str], ...] = ((0, "0"), (1, "1"), (1200, "1200"), (None, "6"))


def check_accepted(f: Failures) -> None:
    for lead in ACCEPTED_PUBLISH_LEADS:
        try:
            objects = objects_of(render(CHART, {"controller": {"keys": {"publishLead": lead}}}))
        except helm.HelmError as e:
            f.check(False, f"a publishLead of {lead} is refused; it must render: {e}")
            continue
        env = {
            e["name"]: e.get("value")
            for o in objects
            if o["kind"] == "Deployment" and o["metadata"]["name"] == "ichor-controller"
            for c in containers(o)
            for e in c.get("env", [])
        }
        f.check(env.get("ICHOR_CONTROLLER_KEY_PUBLISH_LEAD") == lead, f"a publishLead of {lead} renders as {env.get('ICHOR_CONTROLLER_KEY_PUBLISH_LEAD')!r}")
    for given, want in ACCEPTED_FAMILY_WRITES:
        try:
            objects = objects_of(render(CHART, family_writes(given)))
        except helm.HelmError as e:
            f.check(False, f"a familyWritesPerMinute of {given!r} is refused; it must render: {e}")
            continue
        env = {
            e["name"]: e.get("value")
            for o in objects
            if o["kind"] == "Deployment" and o["metadata"]["name"] == "ichor-issuer"
            for c in containers(o)
            for e in c.get("env", [])
        }
        got = env.get("ICHOR_ISSUER_FAMILY_WRITES_PER_MINUTE")
        f.check(got == want, f"a familyWritesPerMinute of {given!r} renders as {got!r}, want {want!r}")


def check_refusals(f: Failures) -> None:
    for what, values, namespace, needle in REFUSALS:
        expect_refusal(f, what, lambda: render(CHART, values, namespace), needle)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ichor"
        shutil.copytree(CHART, copy)
        (copy / "values.schema.json").unlink()
        for what, values, needle in TEMPLATE_REFUSALS:
            expect_refusal(f, f"{what} (schema skipped)", lambda: render(copy, values), needle)
    # The roles file is the one source of the built-in roles: without it the chart refuses to
    # render rather than ship without roles.
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ichor"
        shutil.copytree(CHART, copy)
        (copy / "files" / "ichor-roles.yaml").write_text("# nothing\n")
        expect_refusal(f, "an empty roles file", lambda: render(copy, None), "files/ichor-roles.yaml")
        (copy / "files" / "ichor-roles.yaml").write_text("apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n")
        expect_refusal(f, "a Secret in the roles file", lambda: render(copy, None), "is not an RBAC object")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="rewrite the snapshots instead of comparing")
    args = parser.parse_args()
    helm.disable_logging()

    if not ROLES_FILE.exists():
        print(f"chart: {ROLES_FILE.relative_to(ROOT)} is missing; it is the one source of the built-in roles", file=sys.stderr)
        return 1

    f = Failures()
    with helm.Chart.load(CHART) as chart:
        defaults = chart.values
    for config, values_file in CONFIGS.items():
        values = load_values(values_file)
        with helm.Chart.load(CHART) as chart:
            merged = chart.merge_values(values)
        check_lint(f, config, values)
        try:
            rendered = render(CHART, values)
        except helm.HelmError as e:
            f.check(False, f"[{config}] does not render: {e}")
            continue
        objects = objects_of(rendered)
        validated = check_schemas(f, config, objects)
        check_rbac(f, config, objects, merged)
        check_workloads(f, config, objects, merged)
        check_snapshot(f, config, rendered, args.update)
        print(f"chart [{config}]: {len(objects)} objects rendered, {validated} valid against Kubernetes {KUBE_VERSION} (strict)")
    f.check(defaults["ichorUI"]["users"]["enabled"] is False, "users are not off by default")
    f.check(defaults["ichorUI"]["users"]["clusterAdminRoles"] == [], "clusterAdminRoles is not empty by default")
    check_refusals(f)
    print(f"chart: {len(REFUSALS) + len(TEMPLATE_REFUSALS) + 2} refused configurations checked")
    check_accepted(f)
    print(f"chart: {len(ACCEPTED_PUBLISH_LEADS) + len(ACCEPTED_FAMILY_WRITES)} accepted edge values rendered")
    print(f"chart: {seed_names.check_table(f, ROOT, lambda v: objects_of(render(CHART, v)))} seed names checked (README table)")

    for item in f.items:
        print(f"FAIL {item}", file=sys.stderr)
    if f.items:
        print(f"chart: {len(f.items)} check(s) failed", file=sys.stderr)
        return 1
    print("chart: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
