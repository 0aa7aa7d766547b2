//! [`CodeLedger`]: the per-replica single-use set of authorization codes.

use std::collections::HashMap;

use jiff::Timestamp;

use super::LEDGER_CAPACITY;

#[derive(Debug, Clone)]
enum CodeUse {
    Redeeming {
        exp: i64,
        replayed: bool,
    },
    Redeemed {
        exp: i64,
        user: String,
        family: Option<String>,
    },
}

impl CodeUse {
    fn exp(&self) -> i64 {
        match self {
            CodeUse::Redeeming { exp, .. } | CodeUse::Redeemed { exp, .. } => *exp,
        }
    }
}

/// What claiming a code's `jti` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeClaim {
    /// First use: go ahead, then call [`CodeLedger::complete`] or [`CodeLedger::release`].
    First,
    /// The code was used before. If the first use started a refresh family that no replay has
    /// named yet, it is named here so the caller revokes it (RFC 6749 section 4.1.2); it is
    /// named once, so replays of a code cost the store one revocation in all (a caller whose
    /// revocation failed puts it back with [`CodeLedger::revocation_failed`]).
    Replay {
        /// `(user, family id)` to revoke.
        revoke: Option<(String, String)>,
    },
    /// The ledger is full of live codes; answer 503 and let the client retry.
    Full,
}

/// The per-replica single-use set of authorization codes, each remembered until its `exp`.
#[derive(Debug, Default)]
pub struct CodeLedger {
    codes: HashMap<String, CodeUse>,
}

impl CodeLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `jti` (expiring at `exp`, unix seconds) as being redeemed.
    pub fn claim(&mut self, jti: &str, exp: i64, now: Timestamp) -> CodeClaim {
        if let Some(used) = self.codes.get_mut(jti) {
            return match used {
                CodeUse::Redeeming { replayed, .. } => {
                    *replayed = true;
                    CodeClaim::Replay { revoke: None }
                }
                CodeUse::Redeemed { user, family, .. } => CodeClaim::Replay {
                    revoke: family.take().map(|f| (user.clone(), f)),
                },
            };
        }
        if self.codes.len() >= LEDGER_CAPACITY {
            let now = now.as_second();
            self.codes.retain(|_, u| u.exp() > now);
            if self.codes.len() >= LEDGER_CAPACITY {
                return CodeClaim::Full;
            }
        }
        self.codes
            .insert(jti.to_owned(), CodeUse::Redeeming { exp, replayed: false });
        CodeClaim::First
    }

    /// Records the result of a first use; returns true when the code was replayed meanwhile
    /// (the caller then revokes the family it just started, which later replays do not name
    /// again).
    pub fn complete(&mut self, jti: &str, user: &str, family: Option<String>) -> bool {
        let Some(used) = self.codes.get_mut(jti) else {
            return false;
        };
        let (exp, replayed) = match used {
            CodeUse::Redeeming { exp, replayed } => (*exp, *replayed),
            CodeUse::Redeemed { .. } => return false,
        };
        *used = CodeUse::Redeemed {
            exp,
            user: user.to_owned(),
            family: if replayed { None } else { family },
        };
        replayed
    }

    /// The revocation of `family`, named for `jti` by a replay, did not reach the store: the
    /// next replay names it again, so it is retried (unless the code was forgotten meanwhile).
    pub fn revocation_failed(&mut self, jti: &str, family: String) {
        if let Some(CodeUse::Redeemed { family: named, .. }) = self.codes.get_mut(jti) {
            named.get_or_insert(family);
        }
    }

    /// Forgets a first use that failed for a temporary reason (store unavailable), so the
    /// client may retry with the same code, unless it was replayed meanwhile.
    pub fn release(&mut self, jti: &str) {
        if let Some(CodeUse::Redeeming { replayed: false, .. }) = self.codes.get(jti) {
            self.codes.remove(jti);
        }
    }

    /// The number of remembered codes.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether no code is remembered.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }
}
