//! Field errors rendered exactly as `k8s.io/apimachinery/pkg/util/validation/field` renders them,
//! so `ichor authn validate` prints what the kube-apiserver would print at start-up.

use std::fmt;

use serde::Serialize;

use super::goquote;

/// The type of a field error (`field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ErrorKind {
    /// A required value is missing (`Required value`).
    Required,
    /// The value is malformed or not allowed (`Invalid value`).
    Invalid,
    /// The value repeats an earlier one (`Duplicate value`).
    Duplicate,
    /// The field may not be set here (`Forbidden`).
    Forbidden,
    /// The list has too many items (`Too many`).
    TooMany,
    /// The value is not one of the supported values (`Unsupported value`).
    NotSupported,
}

impl ErrorKind {
    /// The text Go prints for this type.
    pub fn text(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::Duplicate => "Duplicate value",
            Self::Forbidden => "Forbidden",
            Self::TooMany => "Too many",
            Self::NotSupported => "Unsupported value",
        }
    }

    /// Whether Go prints the bad value for this type (Required and Forbidden never do).
    fn prints_value(self) -> bool {
        !matches!(self, Self::Required | Self::Forbidden)
    }
}

/// The bad value of a field error, kept typed so it renders the way Go renders it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum FieldValue {
    /// A plain Go `string`: printed with `strconv.Quote`.
    Str(String),
    /// A named Go string type (for example `AudienceMatchPolicyType`): printed as JSON.
    NamedStr(String),
    /// An integer: printed bare.
    Int(i64),
    /// Any other value, already rendered as JSON.
    Json(String),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Str(s) => f.write_str(&goquote::quote(s)),
            Self::NamedStr(s) => f.write_str(&goquote::json_string(s)),
            Self::Int(i) => write!(f, "{i}"),
            Self::Json(j) => f.write_str(j),
        }
    }
}

/// One validation error: `<path>: <TypeText>[: <value>][: <detail>]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FieldError {
    /// The error type.
    pub kind: ErrorKind,
    /// The field path, dotted with `[i]` indexes (`jwt[0].issuer.url`).
    pub path: String,
    /// The bad value, when the type prints one.
    pub value: Option<FieldValue>,
    /// The detail text; empty means none.
    pub detail: String,
}

impl FieldError {
    /// `field.Required(path, detail)`.
    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Required,
            path: path.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// `field.Invalid(path, <string value>, detail)`.
    pub fn invalid(path: impl Into<String>, value: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Invalid,
            path: path.into(),
            value: Some(FieldValue::Str(value.into())),
            detail: detail.into(),
        }
    }

    /// `field.Invalid` with an explicitly typed value.
    pub fn invalid_value(path: impl Into<String>, value: FieldValue, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Invalid,
            path: path.into(),
            value: Some(value),
            detail: detail.into(),
        }
    }

    /// `field.Duplicate(path, <string value>)`.
    pub fn duplicate(path: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Duplicate,
            path: path.into(),
            value: Some(FieldValue::Str(value.into())),
            detail: String::new(),
        }
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Forbidden,
            path: path.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(path: impl Into<String>, actual: usize, max: usize) -> Self {
        let items = if max == 1 { "item" } else { "items" };
        Self {
            kind: ErrorKind::TooMany,
            path: path.into(),
            value: Some(FieldValue::Int(i64::try_from(actual).unwrap_or(i64::MAX))),
            detail: format!("must have at most {max} {items}"),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind.text())?;
        if self.kind.prints_value() {
            match &self.value {
                Some(v) => write!(f, ": {v}")?,
                None => f.write_str(": null")?,
            }
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldError {}

/// The aggregate text of several errors, as `utilerrors.NewAggregate(list).Error()` prints it:
/// de-duplicated by text, one error alone, several as `[e1, e2, ...]`; empty for no errors.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let texts: Vec<String> = errors
        .iter()
        .map(ToString::to_string)
        .filter(|t| seen.insert(t.clone()))
        .collect();
    match texts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_and_forbidden_print_no_value() {
        assert_eq!(
            FieldError::required("jwt[0].issuer.url", "").to_string(),
            "jwt[0].issuer.url: Required value"
        );
        assert_eq!(
            FieldError::forbidden("anonymous", "x y").to_string(),
            "anonymous: Forbidden: x y"
        );
    }

    #[test]
    fn invalid_prints_the_go_quoted_value_then_the_detail() {
        let e = FieldError::invalid("jwt[0].issuer.url", "http://a", "URL scheme must be https");
        assert_eq!(
            e.to_string(),
            r#"jwt[0].issuer.url: Invalid value: "http://a": URL scheme must be https"#
        );
    }

    #[test]
    fn too_many_prints_the_count_bare() {
        assert_eq!(
            FieldError::too_many("jwt", 65, 64).to_string(),
            "jwt: Too many: 65: must have at most 64 items"
        );
    }

    #[test]
    fn aggregate_deduplicates_and_brackets_several_errors() {
        let a = FieldError::required("a", "");
        let b = FieldError::duplicate("b", "x");
        assert_eq!(aggregate(&[]), "");
        assert_eq!(aggregate(std::slice::from_ref(&a)), "a: Required value");
        assert_eq!(
            aggregate(&[a.clone(), b, a]),
            r#"[a: Required value, b: Duplicate value: "x"]"#
        );
    }
}
