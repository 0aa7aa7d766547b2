//! The typed Kubernetes `AuthenticationConfiguration` (`apiserver.config.k8s.io/v1beta1`) and
//! its strict parser.
//!
//! Serialisation writes only what is set (so a rendered file holds exactly the fields the
//! renderer chose); `anonymous.enabled` and `jwt` are always written. Deserialisation is strict
//! like the kube-apiserver's: unknown and duplicated fields are errors, `null` counts as unset.

use serde::{Deserialize, Deserializer, Serialize};

/// The API version this project writes (the one Talos forces as well).
pub const API_VERSION: &str = "apiserver.config.k8s.io/v1beta1";
/// The kind of the object.
pub const KIND: &str = "AuthenticationConfiguration";
/// The versions the kube-apiserver serves for this kind; all decode to the same type.
pub const SERVED_API_VERSIONS: [&str; 3] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1alpha1",
];
/// The largest file [`parse`] reads.
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;
/// The one audience match policy Kubernetes defines.
pub const AUDIENCE_MATCH_ANY: &str = "MatchAny";

fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A list whose `null` items are their type's zero value, as Go's JSON decoding leaves them.
fn nullable_items<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    let items = Option::<Vec<Option<T>>>::deserialize(d)?.unwrap_or_default();
    Ok(items.into_iter().map(Option::unwrap_or_default).collect())
}

/// The kube-apiserver's structured authentication configuration.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthenticationConfiguration {
    /// `apiserver.config.k8s.io/v1beta1` (any served version is accepted when parsing).
    #[serde(default, deserialize_with = "nullable")]
    pub api_version: String,
    /// `AuthenticationConfiguration`.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    /// The JWT authenticators, tried in order; at most 64.
    #[serde(default, deserialize_with = "nullable_items")]
    pub jwt: Vec<JwtAuthenticator>,
    /// The anonymous authenticator; absent leaves it to the `--anonymous-auth` flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous: Option<AnonymousAuthConfig>,
}

impl Default for AuthenticationConfiguration {
    fn default() -> Self {
        Self {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            jwt: Vec::new(),
            anonymous: None,
        }
    }
}

/// One JWT authenticator: an issuer and how its tokens map to a Kubernetes user.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtAuthenticator {
    /// The issuer and how to reach and trust it.
    #[serde(default, deserialize_with = "nullable")]
    pub issuer: Issuer,
    /// Rules every token's claims must pass.
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub claim_validation_rules: Vec<ClaimValidationRule>,
    /// How claims become the user name, groups, uid and extra.
    #[serde(default, deserialize_with = "nullable")]
    pub claim_mappings: ClaimMappings,
    /// Rules the mapped user must pass.
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub user_validation_rules: Vec<UserValidationRule>,
}

/// `jwt[].issuer`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Issuer {
    /// The issuer identifier: must equal the tokens' `iss` exactly.
    #[serde(default, deserialize_with = "nullable")]
    pub url: String,
    /// Where the discovery document is fetched instead of `<url>/.well-known/...`.
    #[serde(rename = "discoveryURL", default, skip_serializing_if = "Option::is_none")]
    pub discovery_url: Option<String>,
    /// PEM CA bundle for TLS to the discovery URL; empty means the host's roots.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub certificate_authority: String,
    /// Acceptable audiences, at least one.
    #[serde(default, deserialize_with = "nullable_items")]
    pub audiences: Vec<String>,
    /// `MatchAny` (required with more than one audience) or empty.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub audience_match_policy: String,
    /// `controlplane` or `cluster`: the egress selector for traffic to the issuer.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub egress_selector_type: String,
}

impl Issuer {
    /// The discovery URL, `""` when unset (Kubernetes treats the two alike).
    pub fn discovery_url(&self) -> &str {
        self.discovery_url.as_deref().unwrap_or("")
    }
}

/// `jwt[].claimValidationRules[]`: the claim form (`claim` + `requiredValue`) or the expression
/// form (`expression` + `message`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimValidationRule {
    /// A string claim that must be present.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub claim: String,
    /// The value the claim must have.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub required_value: String,
    /// A CEL expression over `claims` that must be true.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub expression: String,
    /// The error text when the expression is false.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub message: String,
}

/// `jwt[].claimMappings`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimMappings {
    /// The user name (required).
    #[serde(default, deserialize_with = "nullable")]
    pub username: PrefixedClaimOrExpression,
    /// The groups (optional).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "PrefixedClaimOrExpression::is_empty"
    )]
    pub groups: PrefixedClaimOrExpression,
    /// The uid (optional).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "ClaimOrExpression::is_empty"
    )]
    pub uid: ClaimOrExpression,
    /// Extra attributes (optional).
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extra: Vec<ExtraMapping>,
}

/// A claim with a prefix, or a CEL expression.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixedClaimOrExpression {
    /// The claim to read.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub claim: String,
    /// The prefix: `None` (absent or null) differs from `Some("")` (no prefixing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// A CEL expression over `claims`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub expression: String,
}

impl PrefixedClaimOrExpression {
    /// Whether nothing is set (the mapping is omitted when rendered).
    pub fn is_empty(&self) -> bool {
        self.claim.is_empty() && self.prefix.is_none() && self.expression.is_empty()
    }
}

/// A claim or a CEL expression (no prefix).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimOrExpression {
    /// The claim to read.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub claim: String,
    /// A CEL expression over `claims`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub expression: String,
}

impl ClaimOrExpression {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.claim.is_empty() && self.expression.is_empty()
    }
}

/// `claimMappings.extra[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraMapping {
    /// A lowercase domain-prefixed key (`example.org/foo`).
    #[serde(default, deserialize_with = "nullable")]
    pub key: String,
    /// A CEL expression over `claims` giving a string or a list of strings.
    #[serde(default, deserialize_with = "nullable")]
    pub value_expression: String,
}

/// `jwt[].userValidationRules[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserValidationRule {
    /// A CEL expression over `user` that must be true.
    #[serde(default, deserialize_with = "nullable")]
    pub expression: String,
    /// The error text when it is false.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub message: String,
}

/// `anonymous`: which requests may be anonymous.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousAuthConfig {
    /// Whether anonymous requests are allowed (always written).
    #[serde(default, deserialize_with = "nullable")]
    pub enabled: bool,
    /// Exact request paths that may be anonymous; empty means every path.
    #[serde(
        default,
        deserialize_with = "nullable_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<AnonymousAuthCondition>,
}

/// `anonymous.conditions[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousAuthCondition {
    /// The exact request path.
    #[serde(default, deserialize_with = "nullable")]
    pub path: String,
}

/// Why a configuration file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The file is empty or only whitespace.
    #[error("{file}: empty config data")]
    Empty {
        /// The file name given to [`parse`].
        file: String,
    },
    /// The file is larger than [`MAX_CONFIG_BYTES`].
    #[error(
        "{file}: the file has {size} bytes, more than the {max} an authentication configuration may have"
    )]
    TooLarge {
        /// The file name.
        file: String,
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The file is not valid YAML or JSON.
    #[error("{file}: malformed {format}{}: {message}", location.map(|(l, c)| format!(" at line {l} column {c}")).unwrap_or_default())]
    Syntax {
        /// The file name.
        file: String,
        /// `YAML` or `JSON`.
        format: &'static str,
        /// Line and column (1-based), when known.
        location: Option<(usize, usize)>,
        /// The parser's message.
        message: String,
    },
    /// `apiVersion` is missing or not a served version of the kind.
    #[error(
        "{file}: apiVersion {found:?} is not a version of AuthenticationConfiguration: write apiVersion: {API_VERSION}"
    )]
    ApiVersion {
        /// The file name.
        file: String,
        /// The value found (empty when missing).
        found: String,
    },
    /// `kind` is missing or not `AuthenticationConfiguration`.
    #[error("{file}: kind {found:?} is not AuthenticationConfiguration: write kind: {KIND}")]
    Kind {
        /// The file name.
        file: String,
        /// The value found (empty when missing).
        found: String,
    },
    /// A field is unknown, duplicated or of the wrong type.
    #[error("{file}: {path}: {message}")]
    Field {
        /// The file name.
        file: String,
        /// The path of the offending field (`jwt[0].issuer.url`).
        path: String,
        /// What is wrong with it.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default, deserialize_with = "nullable")]
    api_version: String,
    #[serde(default, deserialize_with = "nullable")]
    kind: String,
}

fn is_json(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Parses an `AuthenticationConfiguration` file (YAML or JSON) strictly, as the kube-apiserver
/// does: empty input, wrong `apiVersion`/`kind`, unknown and duplicated fields are refused, and
/// each error names the field path (or line and column for malformed syntax).
pub fn parse(bytes: &[u8], file_name: &str) -> Result<AuthenticationConfiguration, ParseError> {
    let file = file_name.to_string();
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(ParseError::TooLarge {
            file,
            size: bytes.len(),
            max: MAX_CONFIG_BYTES,
        });
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ParseError::Empty { file });
    }
    if is_json(bytes) {
        return parse_json(bytes, file);
    }
    // The kube-apiserver reads YAML as go-yaml v2 types it, then decodes the JSON strictly.
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError::Syntax {
        file: file.clone(),
        format: "YAML",
        location: None,
        message: e.to_string(),
    })?;
    let value = super::goyaml::to_json(text).map_err(|message| {
        serde_yaml::from_slice::<serde_yaml::Value>(bytes)
            .err()
            .map_or_else(
                || ParseError::Syntax {
                    file: file.clone(),
                    format: "YAML",
                    location: None,
                    message: message.clone(),
                },
                |e| yaml_syntax_error(&file, &e),
            )
    })?;
    let meta: TypeMeta = serde_json::from_value(value.clone()).map_err(|e| {
        yaml_field_error(bytes, &file).unwrap_or_else(|| field_error(&file, "(root)".into(), e.to_string()))
    })?;
    check_type_meta(&file, meta)?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        yaml_field_error(bytes, &file)
            .unwrap_or_else(|| field_error(&file, e.path().to_string(), e.inner().to_string()))
    })
}

fn check_type_meta(file: &str, meta: TypeMeta) -> Result<(), ParseError> {
    if !SERVED_API_VERSIONS.contains(&meta.api_version.as_str()) {
        return Err(ParseError::ApiVersion {
            file: file.to_string(),
            found: meta.api_version,
        });
    }
    if meta.kind != KIND {
        return Err(ParseError::Kind {
            file: file.to_string(),
            found: meta.kind,
        });
    }
    Ok(())
}

fn parse_json(bytes: &[u8], file: String) -> Result<AuthenticationConfiguration, ParseError> {
    let meta: TypeMeta = serde_json::from_slice(bytes).map_err(|e| json_error(&file, &e))?;
    check_type_meta(&file, meta)?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let config: AuthenticationConfiguration = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| field_error(&file, e.path().to_string(), e.inner().to_string()))?;
    de.end().map_err(|e| json_error(&file, &e))?;
    Ok(config)
}

/// serde_yaml's account of why `bytes` does not decode, which names the line and column; `None`
/// when serde_yaml (YAML 1.2) reads it where Go's YAML 1.1 typing does not.
fn yaml_field_error(bytes: &[u8], file: &str) -> Option<ParseError> {
    let de = serde_yaml::Deserializer::from_slice(bytes);
    let e = serde_path_to_error::deserialize::<_, AuthenticationConfiguration>(de).err()?;
    let path = e.path().to_string();
    let text = strip_yaml_location(e.inner());
    // serde_yaml prefixes its own (shorter) path; the caller gets the full one.
    let text = match text.split_once(": ") {
        Some((own, rest)) if !own.contains(' ') && path.starts_with(own) => rest.to_string(),
        _ => text,
    };
    let message = match e.inner().location() {
        Some(l) => format!("{text} (line {} column {})", l.line(), l.column()),
        None => text,
    };
    Some(field_error(file, path, message))
}

fn field_error(file: &str, path: String, message: String) -> ParseError {
    let path = if path == "." { "(root)".to_string() } else { path };
    ParseError::Field {
        file: file.to_string(),
        path,
        message,
    }
}

fn json_error(file: &str, e: &serde_json::Error) -> ParseError {
    ParseError::Syntax {
        file: file.to_string(),
        format: "JSON",
        location: (e.line() > 0).then(|| (e.line(), e.column())),
        message: e.to_string(),
    }
}

fn strip_yaml_location(e: &serde_yaml::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn yaml_syntax_error(file: &str, e: &serde_yaml::Error) -> ParseError {
    ParseError::Syntax {
        file: file.to_string(),
        format: "YAML",
        location: e.location().map(|l| (l.line(), l.column())),
        message: strip_yaml_location(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\n";

    fn err(text: &str) -> String {
        match parse(text.as_bytes(), "auth.yaml") {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn refuses_empty_input_like_the_kube_apiserver() {
        assert_eq!(err(""), "auth.yaml: empty config data");
        assert_eq!(err("  \n"), "auth.yaml: empty config data");
    }

    #[test]
    fn refuses_a_file_over_one_mebibyte() {
        let big = format!("{MINIMAL}#{}\n", "x".repeat(MAX_CONFIG_BYTES));
        assert!(matches!(
            parse(big.as_bytes(), "f"),
            Err(ParseError::TooLarge { .. })
        ));
    }

    #[test]
    fn refuses_the_wrong_api_version_or_kind() {
        assert_eq!(
            err("apiVersion: v1\nkind: AuthenticationConfiguration\n"),
            "auth.yaml: apiVersion \"v1\" is not a version of AuthenticationConfiguration: write apiVersion: apiserver.config.k8s.io/v1beta1"
        );
        assert_eq!(
            err("apiVersion: apiserver.config.k8s.io/v1\nkind: Foo\n"),
            "auth.yaml: kind \"Foo\" is not AuthenticationConfiguration: write kind: AuthenticationConfiguration"
        );
        assert!(err("jwt: []\n").contains("apiVersion \"\""));
    }

    #[test]
    fn accepts_every_served_version() {
        for v in SERVED_API_VERSIONS {
            let text = format!("apiVersion: {v}\nkind: AuthenticationConfiguration\njwt: []\n");
            assert!(parse(text.as_bytes(), "f").is_ok(), "{v}");
        }
    }

    #[test]
    fn refuses_an_unknown_field_and_names_its_path() {
        let e = err(&format!(
            "{MINIMAL}jwt:\n- issuer:\n    url: https://x\n    audience: [a]\n"
        ));
        assert!(
            e.starts_with("auth.yaml: jwt[0].issuer.audience: unknown field `audience`, expected one of"),
            "{e}"
        );
        assert!(e.ends_with("(line 6 column 5)"), "{e}");
    }

    #[test]
    fn refuses_a_duplicated_field() {
        let e = err(&format!(
            "{MINIMAL}anonymous:\n  enabled: true\n  enabled: false\n"
        ));
        assert!(e.contains("duplicate") && e.contains("enabled"), "{e}");
        let j = r#"{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"AuthenticationConfiguration","jwt":[],"jwt":[]}"#;
        let e = parse(j.as_bytes(), "a.json").unwrap_err().to_string();
        assert!(e.contains("duplicate field `jwt`"), "{e}");
    }

    #[test]
    fn reports_line_and_column_of_malformed_yaml() {
        let e = err("apiVersion: [\n");
        assert!(e.starts_with("auth.yaml: malformed YAML at line"), "{e}");
        let e = parse(b"{\"apiVersion\": }", "a.json").unwrap_err().to_string();
        assert!(e.starts_with("a.json: malformed JSON at line 1 column"), "{e}");
    }

    #[test]
    fn reports_a_wrong_type_with_its_path() {
        let e = err(&format!("{MINIMAL}jwt:\n- issuer:\n    audiences: abc\n"));
        assert!(
            e.starts_with("auth.yaml: jwt[0].issuer.audiences: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn keeps_an_empty_prefix_apart_from_an_absent_one() {
        let text = format!(
            "{MINIMAL}jwt:\n- claimMappings:\n    username: {{claim: sub, prefix: \"\"}}\n    groups: {{claim: g, prefix: null}}\n"
        );
        let c = parse(text.as_bytes(), "f").unwrap();
        assert_eq!(c.jwt[0].claim_mappings.username.prefix.as_deref(), Some(""));
        assert_eq!(c.jwt[0].claim_mappings.groups.prefix, None);
    }

    #[test]
    fn reads_json_and_yaml_alike() {
        let j = r#"{"apiVersion":"apiserver.config.k8s.io/v1beta1","kind":"AuthenticationConfiguration",
            "anonymous":{"enabled":true,"conditions":[{"path":"/livez"}]}}"#;
        let y = format!("{MINIMAL}anonymous:\n  enabled: true\n  conditions:\n  - path: /livez\n");
        assert_eq!(
            parse(j.as_bytes(), "a").unwrap(),
            parse(y.as_bytes(), "b").unwrap()
        );
    }

    #[test]
    fn serialises_only_what_is_set() {
        let c = AuthenticationConfiguration {
            anonymous: Some(AnonymousAuthConfig {
                enabled: false,
                conditions: vec![],
            }),
            ..Default::default()
        };
        let text = serde_yaml::to_string(&c).unwrap();
        assert_eq!(text, format!("{MINIMAL}jwt: []\nanonymous:\n  enabled: false\n"));
    }

    #[test]
    fn types_yaml_scalars_as_the_kube_apiserver_does() {
        let anon = |v: &str| parse(format!("{MINIMAL}anonymous: {{enabled: {v}}}\n").as_bytes(), "f");
        for yes in ["yes", "on", "y", "True"] {
            assert!(anon(yes).unwrap().anonymous.unwrap().enabled, "{yes}");
        }
        assert!(!anon("off").unwrap().anonymous.unwrap().enabled);
        assert!(anon("'true'").is_err(), "a quoted string is no boolean");
        let url = |v: &str| {
            parse(
                format!("{MINIMAL}jwt:\n- issuer: {{url: {v}, audiences: [a]}}\n").as_bytes(),
                "f",
            )
        };
        for not_a_string in ["123", "1.5", "true", "yes", "0x1F"] {
            let e = url(not_a_string).unwrap_err().to_string();
            assert!(e.contains("jwt[0].issuer.url"), "{not_a_string}: {e}");
        }
        assert_eq!(url("'123'").unwrap().jwt[0].issuer.url, "123");
        assert_eq!(url("2001-12-14").unwrap().jwt[0].issuer.url, "2001-12-14");
    }

    #[test]
    fn reads_null_list_items_as_zero_values() {
        let text =
            format!("{MINIMAL}jwt:\n- issuer: {{audiences: [null, a]}}\nanonymous: {{conditions: [null]}}\n");
        let c = parse(text.as_bytes(), "f").unwrap();
        assert_eq!(c.jwt[0].issuer.audiences, ["", "a"]);
        assert_eq!(
            c.anonymous.unwrap().conditions,
            [AnonymousAuthCondition::default()]
        );
    }

    #[test]
    fn reads_the_first_of_several_yaml_documents() {
        let c = parse(format!("{MINIMAL}jwt: []\n---\nfoo: 1\n").as_bytes(), "f").unwrap();
        assert!(c.jwt.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse(&bytes, "fuzz");
        }

        #[test]
        fn never_panics_on_arbitrary_text_after_a_valid_header(tail in "[ -~\n]{0,256}") {
            let _ = parse(format!("{MINIMAL}{tail}").as_bytes(), "fuzz");
        }
    }
}
