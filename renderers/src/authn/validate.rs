//! `ValidateAuthenticationConfiguration` of the kube-apiserver (Kubernetes 1.34+ messages), as
//! pure code: every rule of the spec's section 6 in the upstream emission order.
//!
//! CEL is checked by [`super::cel`] (see its documentation for what can and cannot be found
//! without a CEL compiler); every non-CEL rule is exact.

use std::collections::{BTreeSet, HashSet};

use super::{
    cel::{self, CelError, CelInfo, Env},
    field::{FieldError, FieldValue},
    model::{AUDIENCE_MATCH_ANY, AuthenticationConfiguration, ClaimMappings, ClaimValidationRule, Issuer},
    model::{JwtAuthenticator, PrefixedClaimOrExpression, UserValidationRule},
};

/// The most JWT authenticators a configuration may have.
pub const MAX_JWT_AUTHENTICATORS: usize = 64;

/// What the caller knows that the file does not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValidationOptions {
    /// Issuer URLs no authenticator may use: the cluster's service-account issuers (on Talos
    /// the control-plane endpoint URL).
    pub disallowed_issuers: Vec<String>,
}

/// Validates a configuration as the kube-apiserver does at start-up. An empty list means the
/// kube-apiserver would accept it (up to the CEL checks it alone can make).
pub fn validate(config: &AuthenticationConfiguration, options: &ValidationOptions) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if config.jwt.len() > MAX_JWT_AUTHENTICATORS {
        errs.push(FieldError::too_many(
            "jwt",
            config.jwt.len(),
            MAX_JWT_AUTHENTICATORS,
        ));
        return errs;
    }
    let disallowed: BTreeSet<&str> = options.disallowed_issuers.iter().map(String::as_str).collect();
    let mut seen_issuers = HashSet::new();
    let mut seen_discovery = HashSet::new();
    for (i, a) in config.jwt.iter().enumerate() {
        let p = format!("jwt[{i}]");
        validate_authenticator(a, &p, &disallowed, &mut errs);
        if seen_issuers.contains(a.issuer.url.as_str()) {
            errs.push(FieldError::duplicate(format!("{p}.issuer.url"), &a.issuer.url));
        }
        seen_issuers.insert(a.issuer.url.as_str());
        let d = a.issuer.discovery_url();
        if !d.is_empty() {
            if seen_discovery.contains(d) {
                errs.push(FieldError::duplicate(format!("{p}.issuer.discoveryURL"), d));
            }
            seen_discovery.insert(d);
        }
    }
    if let Some(anon) = &config.anonymous
        && !anon.enabled
        && !anon.conditions.is_empty()
    {
        // Go marshals the internal type, whose fields have no JSON names: `[{"Path":"/x"}]`.
        let conditions: Vec<serde_json::Value> = anon
            .conditions
            .iter()
            .map(|c| serde_json::json!({ "Path": c.path }))
            .collect();
        let json = super::goquote::go_json_escape(&serde_json::Value::Array(conditions).to_string());
        errs.push(FieldError::invalid_value(
            "anonymous.conditions",
            FieldValue::Json(json),
            "enabled should be set to true when conditions are defined",
        ));
    }
    errs
}

/// The V-M10 state of one authenticator.
#[derive(Default)]
struct EmailState {
    uses_email: bool,
    uses_email_verified: bool,
}

fn validate_authenticator(
    a: &JwtAuthenticator,
    p: &str,
    disallowed: &BTreeSet<&str>,
    errs: &mut Vec<FieldError>,
) {
    validate_issuer(&a.issuer, &format!("{p}.issuer"), disallowed, errs);
    let mut email = EmailState::default();
    validate_claim_rules(
        &a.claim_validation_rules,
        &format!("{p}.claimValidationRules"),
        &mut email,
        errs,
    );
    validate_claim_mappings(&a.claim_mappings, &format!("{p}.claimMappings"), &mut email, errs);
    validate_user_rules(
        &a.user_validation_rules,
        &format!("{p}.userValidationRules"),
        errs,
    );
}

fn validate_issuer(issuer: &Issuer, p: &str, disallowed: &BTreeSet<&str>, errs: &mut Vec<FieldError>) {
    let url_path = format!("{p}.url");
    if issuer.url.is_empty() {
        errs.push(FieldError::required(&url_path, ""));
    } else {
        validate_url(&issuer.url, Some(disallowed), &url_path, errs);
    }

    let discovery = issuer.discovery_url();
    if !discovery.is_empty() {
        let path = format!("{p}.discoveryURL");
        if !issuer.url.is_empty() && issuer.url.trim_end_matches('/') == discovery.trim_end_matches('/') {
            errs.push(FieldError::invalid(
                &path,
                discovery,
                "discoveryURL must be different from URL",
            ));
        }
        validate_url(discovery, None, &path, errs);
    }

    validate_audiences(issuer, p, errs);

    if !issuer.certificate_authority.is_empty()
        && let Some(detail) = certificate_authority_error(&issuer.certificate_authority)
    {
        errs.push(FieldError::invalid(
            format!("{p}.certificateAuthority"),
            "<omitted>",
            detail,
        ));
    }

    let egress = issuer.egress_selector_type.as_str();
    if !egress.is_empty() && egress != "controlplane" && egress != "cluster" {
        errs.push(FieldError::invalid(
            format!("{p}.egressSelectorType"),
            egress,
            "egress selector must be either controlplane or cluster",
        ));
    }
}

/// `validateURL`: disallowed issuers (before parsing), then Go's parse, scheme, user info,
/// query and fragment.
fn validate_url(u: &str, disallowed: Option<&BTreeSet<&str>>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(set) = disallowed
        && set.contains(u)
    {
        let list = set.iter().copied().collect::<Vec<_>>().join(" ");
        errs.push(FieldError::invalid(
            path,
            u,
            format!("URL must not overlap with disallowed issuers: [{list}]"),
        ));
    }
    let parsed = match super::gourl::parse(u) {
        Ok(parsed) => parsed,
        Err(e) => {
            errs.push(FieldError::invalid(path, u, e.to_string()));
            return;
        }
    };
    if parsed.scheme != "https" {
        errs.push(FieldError::invalid(path, u, "URL scheme must be https"));
    }
    if parsed.has_user {
        errs.push(FieldError::invalid(
            path,
            u,
            "URL must not contain a username or password",
        ));
    }
    if !parsed.raw_query.is_empty() {
        errs.push(FieldError::invalid(path, u, "URL must not contain a query"));
    }
    if !parsed.fragment.is_empty() {
        errs.push(FieldError::invalid(path, u, "URL must not contain a fragment"));
    }
}

fn validate_audiences(issuer: &Issuer, p: &str, errs: &mut Vec<FieldError>) {
    let path = format!("{p}.audiences");
    let auds = &issuer.audiences;
    if auds.is_empty() {
        errs.push(FieldError::required(
            &path,
            format!("at least one {path} is required"),
        ));
        return;
    }
    let mut seen = HashSet::new();
    for (k, a) in auds.iter().enumerate() {
        if a.is_empty() {
            errs.push(FieldError::required(format!("{path}[{k}]"), ""));
        }
        if !seen.insert(a.as_str()) {
            errs.push(FieldError::duplicate(format!("{path}[{k}]"), a));
        }
    }
    let policy = issuer.audience_match_policy.as_str();
    let policy_path = format!("{p}.audienceMatchPolicy");
    let value = || FieldValue::NamedStr(policy.to_string());
    if auds.len() > 1 && policy != AUDIENCE_MATCH_ANY {
        errs.push(FieldError::invalid_value(
            &policy_path,
            value(),
            "audienceMatchPolicy must be MatchAny for multiple audiences",
        ));
    }
    if auds.len() == 1 && !policy.is_empty() && policy != AUDIENCE_MATCH_ANY {
        errs.push(FieldError::invalid_value(
            &policy_path,
            value(),
            "audienceMatchPolicy must be empty or MatchAny for single audience",
        ));
    }
}

/// `cert.ParseCertsPEM`: V-C1 when no `CERTIFICATE` block without headers exists, V-C2 when one
/// does not parse as X.509.
///
/// # Approximation
/// Go stops at the first PEM block it cannot decode; `pem::parse_many` refuses the whole input
/// instead, and that is reported as V-C1. The V-C2 detail is always Go's most common one,
/// `x509: malformed certificate` (the DER is not a certificate at all); Go names some other
/// faults of a well-formed DER more precisely.
pub fn certificate_authority_error(pem_text: &str) -> Option<String> {
    const NO_CERTS: &str = "data does not contain any valid RSA or ECDSA certificates";
    const MALFORMED: &str = "x509: malformed certificate";
    let Ok(blocks) = pem::parse_many(pem_text.as_bytes()) else {
        return Some(NO_CERTS.to_string());
    };
    let mut found = false;
    for block in blocks
        .iter()
        .filter(|b| b.tag() == "CERTIFICATE" && b.headers().iter().next().is_none())
    {
        match x509_parser::parse_x509_certificate(block.contents()) {
            Err(_) => return Some(MALFORMED.to_string()),
            Ok((rest, _)) if !rest.is_empty() => return Some("x509: trailing data".to_string()),
            Ok(_) => {}
        }
        found = true;
    }
    (!found).then(|| NO_CERTS.to_string())
}

fn cel_error(path: &str, expr: &str, e: CelError) -> FieldError {
    match e {
        CelError::Compile(m) => FieldError::invalid(path, expr, format!("compilation failed: {m}")),
        CelError::NotBool => FieldError::invalid(path, expr, "must evaluate to bool"),
    }
}

fn compile(
    path: &str,
    expr: &str,
    env: Env,
    must_be_bool: bool,
    errs: &mut Vec<FieldError>,
) -> Option<CelInfo> {
    match cel::check(expr, env, must_be_bool) {
        Ok(info) => Some(info),
        Err(e) => {
            errs.push(cel_error(path, expr, e));
            None
        }
    }
}

fn validate_claim_rules(
    rules: &[ClaimValidationRule],
    p: &str,
    email: &mut EmailState,
    errs: &mut Vec<FieldError>,
) {
    let mut seen_claims = HashSet::new();
    let mut seen_exprs = HashSet::new();
    for (k, r) in rules.iter().enumerate() {
        let path = format!("{p}[{k}]");
        match (r.claim.is_empty(), r.expression.is_empty()) {
            (false, false) => {
                errs.push(FieldError::invalid(
                    &path,
                    &r.claim,
                    "claim and expression can't both be set",
                ));
            }
            (true, true) => errs.push(FieldError::required(&path, "claim or expression is required")),
            (false, true) => {
                if !r.message.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{path}.message"),
                        &r.message,
                        "may not be specified when claim is set",
                    ));
                }
                if !seen_claims.insert(r.claim.as_str()) {
                    errs.push(FieldError::duplicate(format!("{path}.claim"), &r.claim));
                }
            }
            (true, false) => {
                if !r.required_value.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{path}.requiredValue"),
                        &r.required_value,
                        "may not be specified when expression is set",
                    ));
                }
                let expr_path = format!("{path}.expression");
                if !seen_exprs.insert(r.expression.as_str()) {
                    errs.push(FieldError::duplicate(&expr_path, &r.expression));
                    continue;
                }
                if let Some(info) = compile(&expr_path, &r.expression, Env::Claims, true, errs) {
                    email.uses_email_verified |= info.uses_email_verified;
                }
            }
        }
    }
}

/// `validatePrefixClaimOrExpression`: returns the expression's info when it compiled and the
/// mapping had no error at all (upstream only then counts it for V-M10).
fn validate_prefixed(
    m: &PrefixedClaimOrExpression,
    path: &str,
    required: bool,
    errs: &mut Vec<FieldError>,
) -> Option<CelInfo> {
    let before = errs.len();
    let mut info = None;
    match (m.claim.is_empty(), m.expression.is_empty()) {
        (false, false) => errs.push(FieldError::invalid(
            path,
            "",
            "claim and expression can't both be set",
        )),
        (true, true) => {
            if required {
                errs.push(FieldError::required(path, "claim or expression is required"));
            }
        }
        (_, false) => {
            if let Some(prefix) = &m.prefix {
                errs.push(FieldError::invalid(
                    format!("{path}.prefix"),
                    prefix,
                    "may not be specified when expression is set",
                ));
            }
            info = compile(
                &format!("{path}.expression"),
                &m.expression,
                Env::Claims,
                false,
                errs,
            );
        }
        (false, true) => {
            if m.prefix.is_none() {
                errs.push(FieldError::required(
                    format!("{path}.prefix"),
                    "prefix is required when claim is set. It can be set to an empty string to disable prefixing",
                ));
            }
        }
    }
    if errs.len() == before { info } else { None }
}

fn validate_claim_mappings(m: &ClaimMappings, p: &str, email: &mut EmailState, errs: &mut Vec<FieldError>) {
    if let Some(info) = validate_prefixed(&m.username, &format!("{p}.username"), true, errs) {
        email.uses_email |= info.uses_email;
        email.uses_email_verified |= info.uses_email_verified;
    }
    validate_prefixed(&m.groups, &format!("{p}.groups"), false, errs);

    let uid_path = format!("{p}.uid");
    match (m.uid.claim.is_empty(), m.uid.expression.is_empty()) {
        (false, false) => errs.push(FieldError::invalid(
            &uid_path,
            "",
            "claim and expression can't both be set",
        )),
        (true, false) => {
            compile(
                &format!("{uid_path}.expression"),
                &m.uid.expression,
                Env::Claims,
                false,
                errs,
            );
        }
        _ => {}
    }

    let mut seen_keys = HashSet::new();
    for (k, x) in m.extra.iter().enumerate() {
        let path = format!("{p}.extra[{k}]");
        let key_path = format!("{path}.key");
        domain_prefixed_path(&key_path, &x.key, errs);
        if x.key != x.key.to_lowercase() {
            errs.push(FieldError::invalid(&key_path, &x.key, "must be lowercase"));
        }
        if is_kubernetes_domain_prefix(&x.key) {
            errs.push(FieldError::invalid(
                &key_path,
                &x.key,
                "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
            ));
        }
        if !seen_keys.insert(x.key.as_str()) {
            errs.push(FieldError::duplicate(&key_path, &x.key));
            continue;
        }
        let value_path = format!("{path}.valueExpression");
        if x.value_expression.is_empty() {
            errs.push(FieldError::required(&value_path, ""));
            continue;
        }
        if let Some(info) = compile(&value_path, &x.value_expression, Env::Claims, false, errs) {
            email.uses_email_verified |= info.uses_email_verified;
        }
    }

    if email.uses_email && !email.uses_email_verified {
        errs.push(FieldError::invalid(
            format!("{p}.username.expression"),
            &m.username.expression,
            "claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
        ));
    }
}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const INVALID_PATH_MSG: &str =
    "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')";

/// `utilvalidation.IsDomainPrefixedPath`.
fn domain_prefixed_path(path: &str, key: &str, errs: &mut Vec<FieldError>) {
    if key.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let Some((host, rest)) = key
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        errs.push(FieldError::invalid(
            path,
            key,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    if host.len() > 253 {
        errs.push(FieldError::invalid(
            path,
            host,
            "must be no more than 253 characters",
        ));
    }
    if !is_dns1123_subdomain(host) {
        errs.push(FieldError::invalid(path, host, DNS1123_SUBDOMAIN_MSG));
    }
    let path_ok = rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b));
    if !path_ok {
        errs.push(FieldError::invalid(path, rest, INVALID_PATH_MSG));
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    })
}

fn is_kubernetes_domain_prefix(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    domain == "kubernetes.io"
        || domain.ends_with(".kubernetes.io")
        || domain == "k8s.io"
        || domain.ends_with(".k8s.io")
}

fn validate_user_rules(rules: &[UserValidationRule], p: &str, errs: &mut Vec<FieldError>) {
    let mut seen = HashSet::new();
    for (k, r) in rules.iter().enumerate() {
        let path = format!("{p}[{k}].expression");
        if r.expression.is_empty() {
            errs.push(FieldError::required(&path, ""));
            continue;
        }
        if !seen.insert(r.expression.as_str()) {
            errs.push(FieldError::duplicate(&path, &r.expression));
            continue;
        }
        compile(&path, &r.expression, Env::User, true, errs);
    }
}

#[cfg(test)]
mod tests;
