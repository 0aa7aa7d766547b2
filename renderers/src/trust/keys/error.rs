//! Why `keys.json`, or a key given to a constructor, was refused: the document-level errors and
//! the problem of one field, each message saying what is accepted instead.

use super::{HMAC_SECRET_BYTES, MAX_RSA_BITS, MIN_RSA_BITS};

/// Why `keys.json` (or a key given to a constructor) was refused. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// The document is larger than [`MAX_DOCUMENT_BYTES`].
    #[error("keys.json is {size} bytes; at most {limit} bytes are accepted")]
    TooLarge {
        /// Size of the refused document.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The document is not JSON (the message gives the position only, never the content).
    #[error("keys.json is not valid JSON: {kind} at line {line}, column {column}")]
    Syntax {
        /// What serde_json found wrong ("syntax error", "unexpected end of input").
        kind: &'static str,
        /// Line of the error, from 1.
        line: usize,
        /// Column of the error, from 1.
        column: usize,
    },
    /// A field is wrong; `path` names it, like `keys[1].pem`.
    #[error("{path}: {problem}")]
    Field {
        /// Path of the field in the document (`v`, `keys[0].kid`, `hmac[2].secret`).
        path: String,
        /// What is wrong with it.
        problem: FieldProblem,
    },
}

/// What is wrong with one field of `keys.json`. Each message says what is accepted instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    /// A required field is absent.
    #[error("is required but missing")]
    Missing,
    /// A field this version does not define.
    #[error("is not a field of keys.json version 1 (allowed here: {allowed})")]
    Unknown {
        /// The fields allowed at that place.
        allowed: &'static str,
    },
    /// The same field appears twice in one object.
    #[error("appears more than once in the same object")]
    Duplicate,
    /// The value has the wrong JSON type.
    #[error("must be {expected}, found {found}")]
    WrongType {
        /// What is expected.
        expected: &'static str,
        /// The JSON type found (never the value).
        found: &'static str,
    },
    /// `v` is not 1.
    #[error("keys.json version {found} is not supported; this build reads version 1 only (upgrade it)")]
    UnsupportedVersion {
        /// The version found.
        found: String,
    },
    /// A list is longer than [`MAX_KEYS_PER_LIST`].
    #[error("holds {count} keys; at most {limit} are accepted")]
    TooMany {
        /// Entries found.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The kid is empty, too long or has characters outside `A-Z a-z 0-9 . _ -`.
    #[error("must be 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'")]
    BadKid,
    /// Two keys of one list share a kid.
    #[error("{kid:?} is also the kid of {first}; every kid of a list must be unique")]
    DuplicateKid {
        /// The repeated kid (kids are public: they are in the JWKS).
        kid: String,
        /// Path of the first key with that kid.
        first: String,
    },
    /// `alg` is not RS256.
    #[error("must be \"RS256\", the only algorithm of the signing keys")]
    UnsupportedAlg,
    /// `pem` holds no PEM block.
    #[error("is not a PEM block; a PKCS#8 \"PRIVATE KEY\" block is required")]
    NotPem,
    /// `pem` holds more than one PEM block, or text around it.
    #[error("must hold exactly one PKCS#8 \"PRIVATE KEY\" block and nothing else")]
    NotOnePemBlock,
    /// `pem` is a PKCS#1 block.
    #[error(
        "is a PKCS#1 \"RSA PRIVATE KEY\" block; PKCS#8 (\"PRIVATE KEY\") is required: convert it with \
         `openssl pkcs8 -topk8 -nocrypt`"
    )]
    Pkcs1,
    /// `pem` is a block of another kind.
    #[error("is a {label:?} PEM block; a PKCS#8 \"PRIVATE KEY\" block is required")]
    WrongPemLabel {
        /// The block's label (shortened when long or unprintable).
        label: String,
    },
    /// The PKCS#8 DER is malformed.
    #[error("is not a well-formed PKCS#8 private key")]
    BadPkcs8,
    /// The PKCS#8 key is not an RSA key.
    #[error("is a PKCS#8 key of another algorithm; RS256 needs an RSA key (rsaEncryption)")]
    NotRsa,
    /// The RSA modulus is too small or too large.
    #[error("is an RSA key of {bits} bits; {MIN_RSA_BITS} to {MAX_RSA_BITS} bits are accepted")]
    RsaSize {
        /// Modulus size found.
        bits: u32,
    },
    /// An instant is not RFC 3339.
    #[error("must be an RFC 3339 instant such as \"2027-01-01T00:00:00Z\"")]
    BadTimestamp,
    /// `secret` is not standard base64.
    #[error("is not standard base64 (alphabet A-Z a-z 0-9 + /, with '=' padding)")]
    BadBase64,
    /// `secret` does not decode to 32 bytes.
    #[error("decodes to {len} bytes; an HMAC secret is exactly {HMAC_SECRET_BYTES} bytes")]
    SecretLength {
        /// Decoded length.
        len: usize,
    },
    /// `activeFrom` is before `createdAt`.
    #[error("is before createdAt; a key cannot sign before it exists")]
    ActiveBeforeCreated,
    /// `retireAfter` is not after `activeFrom`.
    #[error("must be later than activeFrom")]
    RetireNotAfterActive,
}

impl KeysError {
    /// A [`KeysError::Field`] at `path`.
    pub(super) fn field(path: impl Into<String>, problem: FieldProblem) -> Self {
        KeysError::Field {
            path: path.into(),
            problem,
        }
    }
}
