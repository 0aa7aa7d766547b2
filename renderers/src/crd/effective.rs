//! The runtime settings in force: `IchorInstallation.spec.users` over the flags.
//!
//! One rule, used by the issuer per issued token and by the controller's key timeline (which must
//! keep a superseded HMAC key for the longest refresh lifetime the issuer may use): the first
//! installation by name is used; each field it sets replaces the flag's value, each it leaves out
//! keeps the flag's; a value out of range keeps every flag value and is reported (the
//! installation is the operator's to fix, and neither binary may stop meanwhile).

use std::collections::BTreeMap;

use super::{UsersSettings, UsersSpec};

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
        Err(e) => Effective {
            settings: fallback.clone(),
            problem: Some(format!(
                "IchorInstallation {name}: {e}; the flags are used instead"
            )),
        },
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
