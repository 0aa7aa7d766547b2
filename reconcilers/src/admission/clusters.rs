//! `/validate/talosclusters`: `spec.authentication`, the Cilium values and `spec.endpoint`.
//!
//! - `spec.authentication`, when set and on create or when it or `spec.versionContract` changes:
//!   contract v1.14 or later, at most three external providers, the prefix rules
//!   (`renderers::authn::prefix`), with the renderer's messages ([`RenderError`]). Any change of
//!   it (setting, editing, removing) needs `update` on `talosclusters/authentication`: whoever can
//!   repoint the identity provider can break sign-in for everyone.
//! - `spec.cni`: the static Cilium values checks of `renderers::cni` with no facts, when
//!   [`cni::needs_validation`] says so (ratcheting: on create, or when the values, `kubeProxy` or
//!   `tunnel` change), skipped for preset `unmanaged`; any change of the values
//!   ([`cni::values_changed`]) needs `update` on `talosclusters/cilium-values` (ADR 0131).
//! - `spec.endpoint`: an UPDATE that changes it (sets, edits, removes) needs `update` on
//!   `talosclusters/endpoint`: without `kubeAPIServerURL` the issuer writes it as the server of
//!   every kubeconfig it serves. A CREATE needs no more than the create: whoever may create a
//!   cluster (no built-in role may) names its endpoint with it.

use ichor_renderers::authn::prefix;
use ichor_renderers::authn::render::{MAX_EXTERNAL_ISSUERS, RenderError};
use ichor_renderers::cni::{self, CiliumFacts, UNMANAGED_PRESET};
use ichor_renderers::crd::{AuthenticationSpec, CniSpec, TalosClusterSpec};

use super::AdmissionState;
use super::access::{ichor_attributes, require_right};
use super::review::{self, AdmissionRequest, Operation, Verdict, decode};

/// The kind this webhook admits.
pub const KIND: &str = "TalosCluster";
/// The resource whose subresources carry the rights.
pub const RESOURCE: &str = "talosclusters";
/// The subresource whose `update` a change of `spec.authentication` needs.
pub const AUTHENTICATION_SUBRESOURCE: &str = "authentication";
/// The subresource whose `update` a change of `spec.cni.cilium.values` needs.
pub const CILIUM_VALUES_SUBRESOURCE: &str = "cilium-values";
/// The subresource whose `update` a change of `spec.endpoint` needs.
pub const ENDPOINT_SUBRESOURCE: &str = "endpoint";

/// The static checks of a set `spec.authentication` (the renderer's own refusals).
fn authentication_errors(spec: &TalosClusterSpec, auth: &AuthenticationSpec) -> Option<RenderError> {
    match spec.version_contract {
        None => return Some(RenderError::ContractMissing),
        Some(c) if !c.supports_structured_authentication() => return Some(RenderError::ContractTooOld(c)),
        Some(_) => {}
    }
    if auth.external.len() > MAX_EXTERNAL_ISSUERS {
        return Some(RenderError::TooManyExternal(auth.external.len()));
    }
    let prefixes = prefix::check(auth);
    (!prefixes.is_empty()).then_some(RenderError::Prefix(prefixes))
}

/// Decides one `TalosCluster` admission request.
pub async fn review(state: &AdmissionState, req: &AdmissionRequest) -> Verdict {
    let spec = |which, object| decode::<TalosClusterSpec>(which, KIND, object);
    let decoded = match req.operation {
        Operation::Create => spec("object", req.object.as_ref()).map(|n| (None, n)),
        Operation::Update => spec("oldObject", req.old_object.as_ref())
            .and_then(|o| spec("object", req.object.as_ref()).map(|n| (Some(o), n))),
        ref op => Err(Verdict::deny(format!(
            "request.operation: {:?} is not admitted for TalosCluster; only CREATE and UPDATE are",
            review::operation_name(op)
        ))),
    };
    let (old, new) = match decoded {
        Ok(pair) => pair,
        Err(denial) => return denial,
    };
    let old_spec = old.as_ref().map(|o| &o.spec);

    // spec.authentication: static checks (ratcheted on the fields they read), then the right.
    let new_auth = new.spec.authentication.as_ref();
    let auth_changed = old_spec.and_then(|s| s.authentication.as_ref()) != new_auth;
    let contract_changed = old_spec.map(|s| s.version_contract) != Some(new.spec.version_contract);
    if let Some(auth) = new_auth
        && (auth_changed || contract_changed)
        && let Some(error) = authentication_errors(&new.spec, auth)
    {
        return Verdict::deny(error.to_string());
    }

    // spec.cni: the Cilium values checks (ratcheted), then the right.
    let default_cni = CniSpec::default();
    let new_cni = new.spec.cni.as_ref().unwrap_or(&default_cni);
    let old_cni = old_spec.map(|s| s.cni.as_ref().unwrap_or(&default_cni));
    let unmanaged = new_cni.preset.as_deref() == Some(UNMANAGED_PRESET);
    if !unmanaged && cni::needs_validation(old_cni, new_cni) {
        let violations = cni::validate(new_cni, &CiliumFacts::default());
        if !violations.is_empty() {
            let all: Vec<String> = violations.iter().map(ToString::to_string).collect();
            return Verdict::deny(all.join("; "));
        }
    }
    let values_changed = cni::values_changed(old_cni, new_cni);
    let endpoint_changed = old_spec.is_some_and(|s| s.endpoint != new.spec.endpoint);

    // The rights are asked concurrently: each review is bounded, and together they must fit
    // in the webhook's 5 s.
    let name = new.metadata.name.as_deref().unwrap_or(req.name.as_str());
    let ask = |needed: bool, subresource: &'static str, field: &'static str, needs: &'static str| {
        let attrs = ichor_attributes("update", RESOURCE, subresource, review::namespace(req), name);
        async move {
            if needed {
                require_right(state.reviewer.as_ref(), &req.user_info, &attrs, field, needs).await
            } else {
                Verdict::Allow
            }
        }
    };
    let (authentication, values, endpoint) = tokio::join!(
        ask(
            auth_changed,
            AUTHENTICATION_SUBRESOURCE,
            "spec.authentication",
            "changing it"
        ),
        ask(
            values_changed,
            CILIUM_VALUES_SUBRESOURCE,
            "spec.cni.cilium.values",
            "changing the Cilium values"
        ),
        ask(
            endpoint_changed,
            ENDPOINT_SUBRESOURCE,
            "spec.endpoint",
            "changing the control-plane endpoint (the server of Ichor's kubeconfigs)"
        ),
    );
    [authentication, values, endpoint]
        .into_iter()
        .find(|verdict| !verdict.is_allowed())
        .unwrap_or(Verdict::Allow)
}
