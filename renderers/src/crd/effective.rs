//! The runtime settings in force: `IchorInstallation.spec.users` over the flags.
//!
//! One rule, used by the issuer per issued token and by the controller's key timeline (which must
//! keep a superseded HMAC key for the longest refresh lifetime the issuer may use): the first
//! installation by name is used; each field it sets replaces the flag's value, each it leaves out
//! keeps the flag's; a value out of range keeps every flag value and is reported (the
//! installation is the operator's to fix, and neither binary may stop meanwhile).
//!
//! The second-factor policy has no flag and fails closed: it is the installation's whenever that
//! reads, even when another field is out of range, and when it does not read (a role named
//! badly, too many roles: only possible past the CRD's schema) a second factor is required of
//! everyone until it is fixed — the web UI stays open to them, so they can enrol.

use std::collections::BTreeMap;

use super::{SecondFactorSpec, UsersSettings, UsersSpec};
use crate::auth::second_factor_policy::SecondFactorPolicy;

/// The settings in force and, when the installation's could not be used as given, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// What the issuer uses.
    pub settings: UsersSettings,
    /// Why some of the installation's values are not used (logged once per change).
    pub problem: Option<String>,
}

/// The settings from `installations` (name → `spec.users`) over `fallback` (the flags).
pub fn effective(fallback: &UsersSettings, installations: &BTreeMap<String, Option<UsersSpec>>) -> Effective {
    let Some((name, spec)) = installations.iter().next() else {
        return Effective {
            settings: fallback.clone(),
            problem: None,
        };
    };
    let spec = spec.clone().unwrap_or_default();
    let merged = UsersSpec {
        token_ttl: spec.token_ttl.or(Some(fallback.token_ttl)),
        refresh_lifetime: spec.refresh_lifetime.or(Some(fallback.refresh_lifetime)),
        kube_api_server_url: spec
            .kube_api_server_url
            .filter(|u| !u.is_empty())
            .or_else(|| fallback.kube_api_server_url.clone()),
        kube_api_tls_server_name: spec
            .kube_api_tls_server_name
            .filter(|s| !s.is_empty())
            .or_else(|| fallback.kube_api_tls_server_name.clone()),
        credentials_layout: spec.credentials_layout,
        second_factor: spec.second_factor.clone(),
    };
    let more = (installations.len() > 1).then(|| {
        format!(
            "{} IchorInstallations exist; the settings of {name} are used",
            installations.len()
        )
    });
    match UsersSettings::resolve(Some(&merged)) {
        Ok(settings) => Effective {
            settings,
            problem: more,
        },
        Err(e) => {
            let mut settings = fallback.clone();
            let mut problem = format!("IchorInstallation {name}: {e}; the flags are used instead");
            match spec
                .second_factor
                .as_ref()
                .map(SecondFactorSpec::policy)
                .transpose()
            {
                Ok(policy) => settings.second_factor = policy.unwrap_or_default(),
                Err(_) => {
                    settings.second_factor = SecondFactorPolicy::required_of_everyone();
                    problem.push_str(", and a second factor is required of every user until it is fixed");
                }
            }
            Effective {
                settings,
                problem: Some(problem),
            }
        }
    }
}

/// The second-factor policy in force for `installations` (name → `spec.users`), by the rule of
/// [`effective`] and whatever the flags: the first installation's policy when it reads, none
/// without one, and a second factor required of everyone when it does not read. The controller
/// renders the kube-apiserver's claim validation rules from it
/// ([`crate::authn::second_factor`]), so the apiserver holds the line the issuer holds.
pub fn second_factor_in_force(installations: &BTreeMap<String, Option<UsersSpec>>) -> SecondFactorPolicy {
    let Some((_, spec)) = installations.iter().next() else {
        return SecondFactorPolicy::default();
    };
    match spec
        .as_ref()
        .and_then(|s| s.second_factor.as_ref())
        .map(SecondFactorSpec::policy)
        .transpose()
    {
        Ok(policy) => policy.unwrap_or_default(),
        Err(_) => SecondFactorPolicy::required_of_everyone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::GoDuration;

    fn flags() -> UsersSettings {
        UsersSettings {
            token_ttl: GoDuration::from_secs(600),
            refresh_lifetime: GoDuration::from_secs(24 * 3600),
            kube_api_server_url: Some("https://k8s.example.com".into()),
            kube_api_tls_server_name: None,
            second_factor: SecondFactorPolicy::default(),
        }
    }

    fn users(ttl: Option<&str>, life: Option<&str>) -> Option<UsersSpec> {
        Some(UsersSpec {
            token_ttl: ttl.map(|t| t.parse().unwrap()),
            refresh_lifetime: life.map(|l| l.parse().unwrap()),
            ..Default::default()
        })
    }

    #[test]
    fn without_an_installation_the_flags_are_used() {
        let e = effective(&flags(), &BTreeMap::new());
        assert_eq!(
            e,
            Effective {
                settings: flags(),
                problem: None
            }
        );
    }

    #[test]
    fn each_field_the_installation_sets_replaces_the_flag_and_the_rest_stay() {
        let installations = BTreeMap::from([("ichor".to_owned(), users(Some("2m"), None))]);
        let e = effective(&flags(), &installations);
        assert_eq!(e.settings.token_ttl.as_secs(), 120);
        assert_eq!(e.settings.refresh_lifetime.as_secs(), 24 * 3600);
        assert_eq!(
            e.settings.kube_api_server_url.as_deref(),
            Some("https://k8s.example.com")
        );
        assert_eq!(e.problem, None);
        let empty = BTreeMap::from([("ichor".to_owned(), None)]);
        assert_eq!(effective(&flags(), &empty).settings, flags());
    }

    #[test]
    fn the_first_installation_by_name_is_used_and_the_others_are_reported() {
        let installations = BTreeMap::from([
            ("b".to_owned(), users(Some("3m"), None)),
            ("a".to_owned(), users(Some("2m"), None)),
        ]);
        let e = effective(&flags(), &installations);
        assert_eq!(e.settings.token_ttl.as_secs(), 120);
        assert_eq!(
            e.problem.as_deref(),
            Some("2 IchorInstallations exist; the settings of a are used")
        );
    }

    fn admin_required() -> crate::crd::SecondFactorSpec {
        use crate::auth::second_factor_policy::SecondFactorLevel;
        crate::crd::SecondFactorSpec {
            default: None,
            roles: BTreeMap::from([("admin".to_owned(), SecondFactorLevel::Required)]),
        }
    }

    #[test]
    fn the_installation_s_second_factor_policy_is_used_and_there_is_none_without_one() {
        use crate::auth::second_factor_policy::SecondFactorLevel;
        assert_eq!(
            effective(&flags(), &BTreeMap::new()).settings.second_factor,
            SecondFactorPolicy::default()
        );
        let mut spec = users(None, None).unwrap();
        spec.second_factor = Some(admin_required());
        let e = effective(&flags(), &BTreeMap::from([("ichor".to_owned(), Some(spec))]));
        assert_eq!(e.problem, None);
        assert_eq!(
            e.settings.second_factor.level_for(&["admin"]),
            SecondFactorLevel::Required
        );
        assert_eq!(e.settings.token_ttl, flags().token_ttl);
    }

    #[test]
    fn another_value_out_of_range_does_not_turn_the_second_factor_policy_off() {
        use crate::auth::second_factor_policy::SecondFactorLevel;
        let mut spec = users(Some("16m"), None).unwrap();
        spec.second_factor = Some(admin_required());
        let e = effective(&flags(), &BTreeMap::from([("ichor".to_owned(), Some(spec))]));
        assert_eq!(e.settings.token_ttl, flags().token_ttl, "the flags for the rest");
        assert_eq!(
            e.settings.second_factor.level_for(&["admin"]),
            SecondFactorLevel::Required
        );
        assert!(e.problem.unwrap().contains("spec.users.tokenTTL: 16m"));
    }

    #[test]
    fn an_unreadable_second_factor_policy_requires_a_factor_of_everyone() {
        use crate::auth::second_factor_policy::SecondFactorLevel;
        let mut spec = users(None, None).unwrap();
        let mut bad = admin_required();
        bad.roles.insert("Not A Role".to_owned(), SecondFactorLevel::Off);
        spec.second_factor = Some(bad);
        let e = effective(&flags(), &BTreeMap::from([("ichor".to_owned(), Some(spec))]));
        assert_eq!(
            e.settings.second_factor,
            SecondFactorPolicy::required_of_everyone()
        );
        let problem = e.problem.unwrap();
        assert!(
            problem.starts_with("IchorInstallation ichor: spec.users.secondFactor.roles: \"Not A Role\"")
                && problem.ends_with("a second factor is required of every user until it is fixed"),
            "{problem}"
        );
    }

    #[test]
    fn the_policy_in_force_is_the_one_effective_gives_the_issuer_whatever_the_flags() {
        use crate::auth::second_factor_policy::SecondFactorLevel;
        let mut bad = admin_required();
        bad.roles.insert("Not A Role".to_owned(), SecondFactorLevel::Off);
        let with = |ttl: Option<&str>, policy: Option<crate::crd::SecondFactorSpec>| {
            let mut spec = users(ttl, None).unwrap_or_default();
            spec.second_factor = policy;
            Some(spec)
        };
        let cases: Vec<BTreeMap<String, Option<UsersSpec>>> = vec![
            BTreeMap::new(),
            BTreeMap::from([("ichor".to_owned(), None)]),
            BTreeMap::from([("ichor".to_owned(), with(None, Some(admin_required())))]),
            BTreeMap::from([("ichor".to_owned(), with(Some("16m"), Some(admin_required())))]),
            BTreeMap::from([("ichor".to_owned(), with(None, Some(bad.clone())))]),
            BTreeMap::from([("ichor".to_owned(), with(Some("16m"), Some(bad)))]),
            BTreeMap::from([
                ("a".to_owned(), with(None, None)),
                ("b".to_owned(), with(None, Some(admin_required()))),
            ]),
        ];
        for installations in &cases {
            assert_eq!(
                second_factor_in_force(installations),
                effective(&flags(), installations).settings.second_factor,
                "{installations:?}"
            );
        }
        assert_eq!(
            second_factor_in_force(&cases[4]),
            SecondFactorPolicy::required_of_everyone()
        );
    }

    #[test]
    fn a_value_out_of_range_keeps_every_flag_and_names_the_field() {
        let installations = BTreeMap::from([("ichor".to_owned(), users(Some("2m"), Some("721h")))]);
        let e = effective(&flags(), &installations);
        assert_eq!(e.settings, flags());
        let problem = e.problem.unwrap();
        assert!(
            problem.starts_with("IchorInstallation ichor: spec.users.refreshLifetime: 721h"),
            "{problem}"
        );
    }
}
