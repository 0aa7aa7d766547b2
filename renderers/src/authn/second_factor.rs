//! The kube-apiserver's half of the second-factor policy
//! (`IchorInstallation.spec.users.secondFactor`): `claimValidationRules` on Ichor's own JWT
//! authenticator, so a token that did not prove a second factor is refused by the apiserver
//! itself when the policy requires one of its holder, whatever issued it.
//!
//! The issuer already refuses such a token ([`crate::auth::second_factor_policy`]); the rules
//! make the apiserver hold the same line on its own: against a token an older issuer, a replica
//! with a stale policy or a stolen signing key produced, the apiserver decides from the claims.
//! An ID token's `amr` (RFC 8176) holds `mfa` after a second factor; the `groups` claim holds the
//! user's bare role names (the `ichor:` prefix comes from the claim mapping).
//!
//! - `default: required`: one rule, `amr` must hold `mfa` ([`RULE_MFA`]).
//! - Otherwise one rule per role whose level is `required`, in sorted order: a token whose
//!   `groups` hold that role must prove a second factor; every other token passes.
//! - `off`/`optional` everywhere: no rule, and the rendered document is exactly what it was
//!   before the policy existed (no `claimValidationRules` key at all).
//!
//! A role name goes into a CEL string literal. [`SecondFactorPolicy`] holds only names matching
//! `^[a-z][a-z0-9-]{0,30}$` (checked where it is made, as the CRD's own rule does), and
//! [`cel_string`] escapes every character that could end the literal anyway, so the text of a
//! role can never become code.

use std::fmt::Write as _;

use super::{build::ICHOR_GROUPS_CLAIM, model::ClaimValidationRule};
use crate::{
    auth::{
        credentials::AMR_MFA,
        second_factor_policy::{SecondFactorLevel, SecondFactorPolicy},
    },
    contract::USER_PREFIX,
};

/// The claim listing how the user authenticated (RFC 8176).
pub const AMR_CLAIM: &str = "amr";
/// The rule of a policy that requires a second factor of everyone: `amr` holds `mfa`.
pub const RULE_MFA: &str = "has(claims.amr) && 'mfa' in claims.amr";
/// The message of [`RULE_MFA`].
pub const MESSAGE_MFA: &str = "Ichor's policy requires a second factor";

/// The `claimValidationRules` Ichor's own authenticator carries for `policy`: empty when no
/// level is `required`, one rule when the default is, else one per `required` role in sorted
/// order.
pub fn claim_rules(policy: &SecondFactorPolicy) -> Vec<ClaimValidationRule> {
    if policy.default_level() == SecondFactorLevel::Required {
        return vec![ClaimValidationRule {
            expression: mfa_expression(),
            message: MESSAGE_MFA.to_owned(),
            ..ClaimValidationRule::default()
        }];
    }
    policy
        .roles()
        .iter()
        .filter(|(_, level)| **level == SecondFactorLevel::Required)
        .map(|(role, _)| role_rule(role))
        .collect()
}

/// `has(claims.amr) && 'mfa' in claims.amr`, from its parts. Presence is asked with `has()`:
/// the apiserver's `claims` is a lazy map on which `in` has no overload at run time (the
/// expression compiles, then every evaluation errors).
fn mfa_expression() -> String {
    format!(
        "has(claims.{AMR_CLAIM}) && {} in claims.{AMR_CLAIM}",
        cel_string(AMR_MFA)
    )
}

/// The rule of one `required` role: a token whose `groups` hold `role` must prove a factor.
fn role_rule(role: &str) -> ClaimValidationRule {
    ClaimValidationRule {
        expression: format!(
            "!(has(claims.{ICHOR_GROUPS_CLAIM}) && {role} in claims.{ICHOR_GROUPS_CLAIM}) || ({mfa})",
            role = cel_string(role),
            mfa = mfa_expression(),
        ),
        message: role_message(role),
        ..ClaimValidationRule::default()
    }
}

/// The message of a role's rule: `ichor:<role> needs a second factor` (what the apiserver logs
/// when it refuses a token).
pub fn role_message(role: &str) -> String {
    format!("{USER_PREFIX}{role} needs a second factor")
}

/// `s` as a single-quoted CEL string literal whose value is `s`: `\` and both quotes are
/// escaped, and every character outside printable ASCII is written as a `\u`/`\U` escape, so
/// the literal is plain ASCII and nothing in `s` can end it.
pub fn cel_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            c if c == ' ' || c.is_ascii_graphic() => out.push(c),
            c if (c as u32) < 0x1_0000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::authn::{
        cel::{self, Env},
        celparse::{self, Kind},
    };

    use SecondFactorLevel::{Off, Optional, Required};

    fn policy(default: SecondFactorLevel, roles: &[(&str, SecondFactorLevel)]) -> SecondFactorPolicy {
        let roles = roles.iter().map(|(r, l)| ((*r).to_owned(), *l)).collect();
        SecondFactorPolicy::new(default, roles).unwrap()
    }

    fn expressions(rules: &[ClaimValidationRule]) -> Vec<&str> {
        rules.iter().map(|r| r.expression.as_str()).collect()
    }

    #[test]
    fn off_and_optional_everywhere_add_no_rule() {
        assert!(claim_rules(&SecondFactorPolicy::default()).is_empty());
        for default in [Off, Optional] {
            let p = policy(default, &[("admin", Optional), ("viewer", Off)]);
            assert!(claim_rules(&p).is_empty(), "{default:?}");
        }
    }

    #[test]
    fn a_required_default_is_one_rule_on_amr_whatever_the_roles() {
        let p = policy(Required, &[("admin", Required), ("viewer", Off)]);
        let rules = claim_rules(&p);
        assert_eq!(expressions(&rules), [RULE_MFA]);
        assert_eq!(rules[0].message, MESSAGE_MFA);
        assert_eq!(mfa_expression(), RULE_MFA);
        assert!(rules[0].claim.is_empty() && rules[0].required_value.is_empty());
    }

    #[test]
    fn each_required_role_gets_its_rule_in_sorted_order() {
        let p = policy(
            Optional,
            &[
                ("viewer", Off),
                ("zeta-ops", Required),
                ("admin", Required),
                ("operator", Optional),
            ],
        );
        let rules = claim_rules(&p);
        assert_eq!(
            expressions(&rules),
            [
                "!(has(claims.groups) && 'admin' in claims.groups) || (has(claims.amr) && 'mfa' in claims.amr)",
                "!(has(claims.groups) && 'zeta-ops' in claims.groups) || (has(claims.amr) && 'mfa' in claims.amr)",
            ]
        );
        let messages: Vec<&str> = rules.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "ichor:admin needs a second factor",
                "ichor:zeta-ops needs a second factor",
            ]
        );
    }

    #[test]
    fn every_rule_compiles_as_a_bool_over_claims() {
        let roles: Vec<String> = (0..16).map(|i| format!("r{i}-x")).collect();
        let many: BTreeMap<String, SecondFactorLevel> = roles.iter().map(|r| (r.clone(), Required)).collect();
        let p = SecondFactorPolicy::new(Off, many).unwrap();
        let rules = claim_rules(&p);
        assert_eq!(rules.len(), 16);
        for r in rules
            .iter()
            .chain(&claim_rules(&SecondFactorPolicy::required_of_everyone()))
        {
            assert!(
                cel::check(&r.expression, Env::Claims, true).is_ok(),
                "{}",
                r.expression
            );
        }
    }

    #[test]
    fn a_role_name_that_is_not_one_never_reaches_a_rule() {
        // The policy refuses it where it is made, naming the field.
        for hostile in ["admin' || true || '", "a\\", "x') || ('", "Admin"] {
            let roles = BTreeMap::from([(hostile.to_owned(), Required)]);
            let e = SecondFactorPolicy::new(Off, roles).unwrap_err();
            assert!(
                e.to_string().starts_with("spec.users.secondFactor.roles: "),
                "{e}"
            );
        }
    }

    #[test]
    fn cel_string_keeps_any_text_inside_one_literal() {
        assert_eq!(cel_string("admin"), "'admin'");
        assert_eq!(cel_string("a'b\\c\"d"), r#"'a\'b\\c\"d'"#);
        assert_eq!(cel_string("é\n\u{1f600}"), r"'\u00e9\u000a\U0001f600'");
        // Even if a hostile name got this far, the rule stays one literal compared with the
        // groups: the tree has the same shape as a plain name's.
        for hostile in [
            "admin' in claims.groups || true || '",
            "x') || ('",
            "\\' || true || \\'",
            "a\nb'",
            "'''",
        ] {
            let rule = role_rule(hostile);
            assert!(
                cel::check(&rule.expression, Env::Claims, true).is_ok(),
                "{}",
                rule.expression
            );
            let lit = celparse::parse(&cel_string(hostile)).unwrap();
            assert!(matches!(lit.kind, Kind::Lit(_)), "{hostile:?}: {lit:?}");
            assert_eq!(
                shape(&celparse::parse(&rule.expression).unwrap()),
                shape(&celparse::parse(&role_rule("admin").expression).unwrap()),
                "{}",
                rule.expression
            );
        }
    }

    /// The tree without its literals' text.
    fn shape(e: &celparse::Expr) -> String {
        match &e.kind {
            Kind::Lit(_) => "lit".to_owned(),
            Kind::Ident(n) => n.clone(),
            Kind::Select { operand, field, .. } => format!("{}.{field}", shape(operand)),
            Kind::Call { name, target, args } => format!(
                "{name}({}{})",
                target.as_deref().map(shape).unwrap_or_default(),
                args.iter().map(shape).collect::<Vec<_>>().join(",")
            ),
            Kind::List(items) | Kind::Struct(items) => {
                format!("[{}]", items.iter().map(shape).collect::<Vec<_>>().join(","))
            }
            Kind::Map(entries) => format!("{{{}}}", entries.len()),
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_quoted_parses_back_to_one_literal(s in "\\PC{0,24}|[\\\\'\" \\n]{0,12}") {
            let lit = celparse::parse(&cel_string(&s)).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e:?}")))?;
            proptest::prop_assert!(matches!(lit.kind, Kind::Lit(_)));
            proptest::prop_assert!(cel_string(&s).is_ascii());
        }
    }
}
