//! The issuer's runtime settings as the key timeline needs them: `IchorInstallation.spec.users`
//! over the controller's own flags, by the same rule the issuer uses per token
//! ([`ichor_renderers::crd::effective`]).
//!
//! The flags enter the graph as an object ([`users_fallback_object`]), so they are journaled like
//! every other input and a replay decides with the values the controller had.

use super::{Settings, decode};
use ichor_graph::{Object, ObjectKey};
use ichor_renderers::trust::NAMESPACE;
use jiff::SignedDuration;
use serde_json::json;
use std::collections::BTreeMap;

use ichor_renderers::auth::second_factor_policy::SecondFactorPolicy;
use ichor_renderers::crd::{
    IchorInstallationSpec, UsersSettings, UsersSpec, effective, second_factor_in_force,
};

/// Kind of the synthetic object carrying the controller's `--token-ttl` and `--refresh-lifetime`
/// (never stored in the cluster).
pub const USERS_FALLBACK_KIND: &str = "IchorUsersFallback";
/// Name of that object, in `ichor-system`.
pub const USERS_FALLBACK_NAME: &str = "flags";

/// The synthetic object carrying `fallback` (the flags' token TTL and refresh lifetime) into the
/// graph; the controller pushes it once at start.
pub fn users_fallback_object(fallback: &UsersSettings) -> Object {
    let spec = UsersSpec {
        token_ttl: Some(fallback.token_ttl),
        refresh_lifetime: Some(fallback.refresh_lifetime),
        ..UsersSpec::default()
    };
    Object::new(
        USERS_FALLBACK_KIND,
        NAMESPACE,
        USERS_FALLBACK_NAME,
        json!({ "spec": spec }),
    )
}

/// The flags' object carrying the controller's `--key-publish-lead` too (`keys.publishLeadSeconds`).
pub fn with_publish_lead(mut object: Object, lead: SignedDuration) -> Object {
    object.value["keys"] = json!({ "publishLeadSeconds": lead.as_secs() });
    object
}

/// The publish lead the flags' object carries, if any.
fn publish_lead(flags: &Option<Object>) -> Option<i64> {
    flags
        .as_ref()?
        .value
        .get("keys")?
        .get("publishLeadSeconds")?
        .as_i64()
}

/// The flags from their object; the built-in defaults without one (or with one that does not
/// decode, which is reported).
fn fallback(object: &Option<Object>) -> (UsersSettings, Option<String>) {
    let defaults = || UsersSettings::resolve(None);
    let Some(object) = object else {
        return match defaults() {
            Ok(d) => (d, None),
            Err(e) => (defaults_or_bounds(), Some(e.to_string())),
        };
    };
    match decode::<UsersSpec>(object.value.get("spec"))
        .map_err(|e| e.to_string())
        .and_then(|spec| UsersSettings::resolve(Some(&spec)).map_err(|e| e.to_string()))
    {
        Ok(s) => (s, None),
        Err(e) => (
            defaults().unwrap_or_else(|_| defaults_or_bounds()),
            Some(format!(
                "the controller's --token-ttl/--refresh-lifetime: {e}; the defaults are used"
            )),
        ),
    }
}

/// The upper bounds: what keeps every key long enough when nothing else can be read.
fn defaults_or_bounds() -> UsersSettings {
    UsersSettings {
        token_ttl: UsersSettings::MAX_TOKEN_TTL,
        refresh_lifetime: UsersSettings::MAX_REFRESH_LIFETIME,
        kube_api_server_url: None,
        kube_api_tls_server_name: None,
        second_factor: ichor_renderers::auth::second_factor_policy::SecondFactorPolicy::default(),
    }
}

/// `IchorInstallation`s and the flags' object → the settings. The first installation by name is
/// used; each field it sets replaces the flag's value.
pub(crate) fn settings(installations: &BTreeMap<ObjectKey, Object>, flags: &Option<Object>) -> Settings {
    let (fallback, mut problem) = fallback(flags);
    let mut specs: BTreeMap<String, Option<UsersSpec>> = BTreeMap::new();
    for (key, inst) in installations {
        match decode_spec(inst.value.get("spec")) {
            Ok(spec) => {
                specs.insert(key.name.to_string(), spec.users);
            }
            Err(e) => {
                // The installation is unusable: the upper bounds keep every key long enough
                // whatever it meant to set.
                let bounds = defaults_or_bounds();
                return Settings {
                    max_id_token_ttl_secs: bounds.token_ttl.as_secs(),
                    max_refresh_lifetime_secs: bounds.refresh_lifetime.as_secs(),
                    publish_lead_secs: publish_lead(flags),
                    problem: Some(format!(
                        "IchorInstallation {}: spec does not decode: {e}; the upper bounds are used",
                        key.name
                    )),
                };
            }
        }
    }
    let e = effective(&fallback, &specs);
    if e.problem.is_some() {
        problem = e.problem;
    }
    Settings {
        max_id_token_ttl_secs: e.settings.token_ttl.as_secs(),
        max_refresh_lifetime_secs: e.settings.refresh_lifetime.as_secs(),
        problem,
        publish_lead_secs: publish_lead(flags),
    }
}

/// An installation's `spec` decoded; the error names the field that does not decode
/// (`spec.users.tokenTTL: duration "…" is too large: …`), so the operator knows what to fix.
fn decode_spec(spec: Option<&serde_json::Value>) -> Result<IchorInstallationSpec, String> {
    serde_path_to_error::deserialize(spec.unwrap_or(&serde_json::Value::Null)).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "spec".to_owned()
        } else {
            format!("spec.{path}")
        };
        format!("{field}: {}", e.into_inner())
    })
}

/// `IchorInstallation`s → the second-factor policy in force, by the rule the issuer uses
/// ([`second_factor_in_force`]: the first installation by name decides; the flags carry none).
/// The clusters' authentication documents are rendered from it, so a change of the policy is an
/// input event that re-renders every cluster trusting Ichor's issuer, and the rollout restarts
/// their apiservers.
///
/// An installation whose spec does not decode fails closed, as an unreadable policy does: a
/// second factor is required of everyone until it is fixed (the CRD's schema makes that case
/// all but impossible; the issuer's own watch would refuse the object too).
pub(crate) fn second_factor(installations: &BTreeMap<ObjectKey, Object>) -> SecondFactorPolicy {
    let mut specs: BTreeMap<String, Option<UsersSpec>> = BTreeMap::new();
    for (key, inst) in installations {
        match decode::<IchorInstallationSpec>(inst.value.get("spec")) {
            Ok(spec) => {
                specs.insert(key.name.to_string(), spec.users);
            }
            Err(_) => return SecondFactorPolicy::required_of_everyone(),
        }
    }
    second_factor_in_force(&specs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::sim::fixtures::installation;
    use ichor_renderers::trust::timeline::TimelineSettings;

    fn flags(ttl: &str, lifetime: &str) -> Option<Object> {
        Some(users_fallback_object(&UsersSettings {
            token_ttl: ttl.parse().unwrap(),
            refresh_lifetime: lifetime.parse().unwrap(),
            kube_api_server_url: None,
            kube_api_tls_server_name: None,
            second_factor: ichor_renderers::auth::second_factor_policy::SecondFactorPolicy::default(),
        }))
    }

    fn installations(objects: &[Object]) -> BTreeMap<ObjectKey, Object> {
        objects.iter().map(|o| (o.key(), o.clone())).collect()
    }

    #[test]
    fn the_flags_decide_without_an_installation() {
        let s = settings(&BTreeMap::new(), &flags("10m", "720h"));
        assert_eq!(
            (s.max_id_token_ttl_secs, s.max_refresh_lifetime_secs),
            (600, 720 * 3600)
        );
        assert_eq!(s.problem, None);
    }

    #[test]
    fn the_flags_publish_lead_reaches_the_timeline_and_an_absent_one_keeps_the_default() {
        let lead = SignedDuration::from_mins(2);
        let with = with_publish_lead(flags("5m", "12h").unwrap(), lead);
        let s = settings(&BTreeMap::new(), &Some(with));
        assert_eq!(s.publish_lead_secs, Some(120));
        assert_eq!(s.timeline().publish_lead(), lead);
        let without = settings(&BTreeMap::new(), &flags("5m", "12h"));
        assert_eq!(without.publish_lead_secs, None);
        assert_eq!(
            without.timeline().publish_lead(),
            TimelineSettings::default().publish_lead()
        );
    }

    #[test]
    fn without_the_flags_object_the_built_in_defaults_decide() {
        let s = settings(&BTreeMap::new(), &None);
        assert_eq!(
            (s.max_id_token_ttl_secs, s.max_refresh_lifetime_secs),
            (300, 12 * 3600)
        );
    }

    #[test]
    fn the_installation_replaces_each_field_it_sets() {
        let s = settings(
            &installations(&[installation("2m", "24h")]),
            &flags("10m", "720h"),
        );
        assert_eq!(
            (s.max_id_token_ttl_secs, s.max_refresh_lifetime_secs),
            (120, 24 * 3600)
        );
    }

    #[test]
    fn an_installation_out_of_range_leaves_the_flags_in_force_and_says_why() {
        let s = settings(
            &installations(&[installation("2m", "721h")]),
            &flags("10m", "720h"),
        );
        assert_eq!(
            (s.max_id_token_ttl_secs, s.max_refresh_lifetime_secs),
            (600, 720 * 3600)
        );
        assert!(s.problem.unwrap().contains("spec.users.refreshLifetime: 721h"));
    }

    #[test]
    fn the_second_factor_policy_is_the_first_installation_s_and_fails_closed_when_unreadable() {
        use ichor_renderers::auth::second_factor_policy::SecondFactorLevel;
        assert_eq!(second_factor(&BTreeMap::new()), SecondFactorPolicy::default());
        let plain = installation("2m", "24h");
        assert_eq!(
            second_factor(&installations(std::slice::from_ref(&plain))),
            SecondFactorPolicy::default()
        );
        let mut strict = plain.clone();
        strict.value["spec"]["users"]["secondFactor"] = json!({"roles": {"admin": "required"}});
        let policy = second_factor(&installations(&[strict]));
        assert_eq!(policy.level_for(&["admin"]), SecondFactorLevel::Required);
        assert_eq!(policy.level_for(&["viewer"]), SecondFactorLevel::Off);
        let mut unreadable = plain.clone();
        unreadable.value["spec"]["users"]["secondFactor"] = json!({"roles": {"Admin": "required"}});
        assert_eq!(
            second_factor(&installations(&[unreadable])),
            SecondFactorPolicy::required_of_everyone()
        );
        let mut broken = plain;
        broken.value["spec"]["users"] = json!("not an object");
        assert_eq!(
            second_factor(&installations(&[broken])),
            SecondFactorPolicy::required_of_everyone()
        );
    }

    #[test]
    fn an_undecodable_installation_keeps_keys_for_the_upper_bounds() {
        let mut broken = installation("2m", "24h");
        broken.value["spec"]["users"] = json!("not an object");
        let s = settings(&installations(&[broken]), &flags("5m", "12h"));
        assert_eq!(
            (s.max_id_token_ttl_secs, s.max_refresh_lifetime_secs),
            (900, 720 * 3600)
        );
        assert!(s.problem.unwrap().contains("spec does not decode"));
    }

    #[test]
    fn a_duration_too_large_to_read_is_named_by_its_field() {
        // Twenty digits pass the CRD's pattern ^([0-9]+[hms])+$ but not the parser.
        let mut broken = installation("2m", "24h");
        broken.value["spec"]["users"]["tokenTTL"] = json!("99999999999999999999s");
        let s = settings(&installations(&[broken]), &flags("5m", "12h"));
        assert_eq!(
            (s.max_id_token_ttl_secs, s.max_refresh_lifetime_secs),
            (900, 720 * 3600)
        );
        let problem = s.problem.unwrap();
        assert!(
            problem.contains(
                "spec does not decode: spec.users.tokenTTL: duration \"99999999999999999999s\" is too large"
            ),
            "{problem}"
        );
    }
}
