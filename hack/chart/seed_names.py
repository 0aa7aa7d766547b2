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
