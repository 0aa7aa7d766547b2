//! The strict parser of an `AuthenticationConfiguration` file, YAML or JSON, as the
//! kube-apiserver reads it: each error names the file and the field path, or the line and column
//! of malformed syntax.

use serde::Deserialize;

use super::{
    API_VERSION, AuthenticationConfiguration, KIND, MAX_CONFIG_BYTES, SERVED_API_VERSIONS, nullable,
};

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
    let value = crate::authn::goyaml::to_json(text).map_err(|message| {
        serde_yaml::from_slice::<serde_yaml::Value>(bytes)
            .err()
            .map_or_else(
                || ParseError::Syntax {
                    file: file.clone(),
                    format: "YAML",
                    location: None,
                    message: message.to_string(),
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
