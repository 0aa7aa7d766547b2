//! The reader of `keys.json`: walks the strict JSON value with a path, so every error names its
//! field (`keys[1].pem`), and refuses unknown and repeated members.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jiff::Timestamp;

use super::key::{check_kid, check_times};
use super::{
    FieldProblem, HMAC_SECRET_BYTES, HmacKey, HmacSecret, KEYS_DOCUMENT_VERSION, KeyTimes, KeysDocument,
    KeysError, MAX_KEYS_PER_LIST, PrivateKeyPem, RS256, RsaKey, check_list,
};
use crate::trust::json::Json;

const DOCUMENT_FIELDS: &str = "v, keys, hmac";
const RSA_FIELDS: &str = "kid, alg, pem, createdAt, activeFrom, retireAfter";
const HMAC_FIELDS: &str = "kid, secret, createdAt, activeFrom, retireAfter";

/// A member name made safe to print in a path.
fn path_name(name: &str) -> String {
    if !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        name.to_owned()
    } else {
        "<unprintable field name>".to_owned()
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        path_name(name)
    } else {
        format!("{path}.{}", path_name(name))
    }
}

/// The members of an object, with unknown and repeated members refused.
struct Members<'a> {
    path: String,
    members: &'a [(String, Json)],
}

impl<'a> Members<'a> {
    fn new(path: &str, value: &'a Json, known: &[&str], allowed: &'static str) -> Result<Self, KeysError> {
        let Json::Object(members) = value else {
            let at = if path.is_empty() { "keys.json" } else { path };
            return Err(KeysError::field(
                at,
                FieldProblem::WrongType {
                    expected: "an object",
                    found: value.type_name(),
                },
            ));
        };
        for (i, (name, _)) in members.iter().enumerate() {
            if !known.contains(&name.as_str()) {
                return Err(KeysError::field(
                    join(path, name),
                    FieldProblem::Unknown { allowed },
                ));
            }
            if members.iter().take(i).any(|(n, _)| n == name) {
                return Err(KeysError::field(join(path, name), FieldProblem::Duplicate));
            }
        }
        Ok(Members {
            path: path.to_owned(),
            members,
        })
    }

    fn path(&self, name: &str) -> String {
        join(&self.path, name)
    }

    fn optional(&self, name: &str) -> Option<&'a Json> {
        self.members.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    fn required(&self, name: &str) -> Result<&'a Json, KeysError> {
        self.optional(name)
            .ok_or_else(|| KeysError::field(self.path(name), FieldProblem::Missing))
    }

    fn string(&self, name: &str) -> Result<&'a str, KeysError> {
        match self.required(name)? {
            Json::String(s) => Ok(s),
            other => Err(KeysError::field(
                self.path(name),
                FieldProblem::WrongType {
                    expected: "a string",
                    found: other.type_name(),
                },
            )),
        }
    }

    fn timestamp(&self, name: &str) -> Result<Timestamp, KeysError> {
        parse_timestamp(self.string(name)?).map_err(|p| KeysError::field(self.path(name), p))
    }

    fn optional_timestamp(&self, name: &str) -> Result<Option<Timestamp>, KeysError> {
        match self.optional(name) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) => parse_timestamp(s)
                .map(Some)
                .map_err(|p| KeysError::field(self.path(name), p)),
            Some(other) => Err(KeysError::field(
                self.path(name),
                FieldProblem::WrongType {
                    expected: "a string or null",
                    found: other.type_name(),
                },
            )),
        }
    }

    fn array(&self, name: &str) -> Result<&'a [Json], KeysError> {
        match self.required(name)? {
            Json::Array(items) => Ok(items),
            other => Err(KeysError::field(
                self.path(name),
                FieldProblem::WrongType {
                    expected: "an array",
                    found: other.type_name(),
                },
            )),
        }
    }
}

fn parse_timestamp(s: &str) -> Result<Timestamp, FieldProblem> {
    // RFC 3339 only: a date, 'T', a time and an offset; no bracketed annotations.
    if s.len() > 40 || s.contains('[') {
        return Err(FieldProblem::BadTimestamp);
    }
    s.parse::<Timestamp>().map_err(|_| FieldProblem::BadTimestamp)
}

/// The key-level checks shared by both lists, returning the times with their errors' paths.
fn read_times(m: &Members<'_>) -> Result<(Timestamp, Timestamp, Option<Timestamp>), KeysError> {
    let created_at = m.timestamp("createdAt")?;
    let active_from = m.timestamp("activeFrom")?;
    let retire_after = m.optional_timestamp("retireAfter")?;
    check_times(created_at, active_from, retire_after).map_err(|(f, p)| KeysError::field(m.path(f), p))?;
    Ok((created_at, active_from, retire_after))
}

fn read_kid(m: &Members<'_>) -> Result<String, KeysError> {
    let kid = m.string("kid")?;
    check_kid(kid).map_err(|p| KeysError::field(m.path("kid"), p))?;
    Ok(kid.to_owned())
}

fn read_rsa(path: &str, value: &Json) -> Result<RsaKey, KeysError> {
    let m = Members::new(
        path,
        value,
        &["kid", "alg", "pem", "createdAt", "activeFrom", "retireAfter"],
        RSA_FIELDS,
    )?;
    let kid = read_kid(&m)?;
    if m.string("alg")? != RS256 {
        return Err(KeysError::field(m.path("alg"), FieldProblem::UnsupportedAlg));
    }
    let pem =
        PrivateKeyPem::new(m.string("pem")?.to_owned()).map_err(|p| KeysError::field(m.path("pem"), p))?;
    let (created_at, active_from, retire_after) = read_times(&m)?;
    Ok(RsaKey::checked(kid, pem, created_at, active_from, retire_after))
}

fn read_hmac(path: &str, value: &Json) -> Result<HmacKey, KeysError> {
    let m = Members::new(
        path,
        value,
        &["kid", "secret", "createdAt", "activeFrom", "retireAfter"],
        HMAC_FIELDS,
    )?;
    let kid = read_kid(&m)?;
    let encoded = m.string("secret")?;
    let decoded = STANDARD
        .decode(encoded)
        .map_err(|_| KeysError::field(m.path("secret"), FieldProblem::BadBase64))?;
    let bytes: [u8; HMAC_SECRET_BYTES] = decoded.as_slice().try_into().map_err(|_| {
        KeysError::field(
            m.path("secret"),
            FieldProblem::SecretLength { len: decoded.len() },
        )
    })?;
    let (created_at, active_from, retire_after) = read_times(&m)?;
    Ok(HmacKey::checked(
        kid,
        HmacSecret::new(bytes),
        created_at,
        active_from,
        retire_after,
    ))
}

fn read_list<K: KeyTimes>(
    m: &Members<'_>,
    name: &str,
    read: fn(&str, &Json) -> Result<K, KeysError>,
) -> Result<Vec<K>, KeysError> {
    let items = m.array(name)?;
    if items.len() > MAX_KEYS_PER_LIST {
        return Err(KeysError::field(
            name,
            FieldProblem::TooMany {
                count: items.len(),
                limit: MAX_KEYS_PER_LIST,
            },
        ));
    }
    let mut keys = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        keys.push(read(&format!("{name}[{i}]"), item)?);
    }
    check_list(name, &keys)?;
    Ok(keys)
}

/// The document from its JSON value, every rule checked.
pub(super) fn read_document(json: &Json) -> Result<KeysDocument, KeysError> {
    // The version first: a newer document gets "version 2 is not supported", not a list of
    // unknown fields.
    if let Json::Object(members) = json
        && let Some((_, v)) = members.iter().find(|(n, _)| n == "v")
    {
        match v {
            Json::Number(n) if n.as_u64() == Some(KEYS_DOCUMENT_VERSION) => {}
            Json::Number(n) => {
                return Err(KeysError::field(
                    "v",
                    FieldProblem::UnsupportedVersion { found: n.to_string() },
                ));
            }
            other => {
                return Err(KeysError::field(
                    "v",
                    FieldProblem::WrongType {
                        expected: "the integer 1",
                        found: other.type_name(),
                    },
                ));
            }
        }
    }
    let m = Members::new("", json, &["v", "keys", "hmac"], DOCUMENT_FIELDS)?;
    m.required("v")?;
    let keys = read_list(&m, "keys", read_rsa)?;
    let hmac = read_list(&m, "hmac", read_hmac)?;
    Ok(KeysDocument { keys, hmac })
}
