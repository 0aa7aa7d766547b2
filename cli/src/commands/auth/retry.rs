//! When a token request the issuer refused is tried again, and after how long: the pure decision
//! [`decide`], from the answer's status, OAuth `error` and `Retry-After`, and the time the request
//! has taken so far; and what is said about it ([`waiting_notice`], [`wait_too_long`]).
//!
//! Only answers after which nothing can have been consumed are retried:
//!
//! - `429` with the OAuth error `slow_down` (the issuer's limits): they refuse before anything is
//!   written. A refresh token answered 429 is still the current one (the family's write cap is
//!   taken inside the store's update and answered without a write), and a code answered 429 is
//!   released by the issuer and can be redeemed again within its 60 s life. A `429` without it
//!   comes from something in between (a proxy) that may have passed the request on, and a refresh
//!   token sent again after the issuer's grace window ends its session: not retried.
//! - `503 temporarily_unavailable`, for the code exchange only: the issuer releases a claimed
//!   code on every such answer, so the code can be redeemed again (once a new session's write
//!   began it answers `500 server_error` instead, which is not retried). For a refresh it is never
//!   retried: the issuer may answer 503 after the rotation was written (the store's answer lost,
//!   a signature failing), and the old refresh token presented again once the issuer's 10 s grace
//!   window has passed is taken for a stolen one and ends the session.
//!
//! A `Retry-After` that is missing or not delay-seconds is not retried: Ichor's issuer sends
//! delay-seconds with every 429 and 503, so such an answer comes from something in between (a
//! proxy, a load balancer) of which it is not known whether it passed the request on, nor how
//! long it wants to be left alone; the user gets the error at once instead.

use std::time::Duration;

use reqwest::StatusCode;

use super::error::AuthError;

/// The longest single wait: an issuer asking for more is not waited for.
pub const MAX_SINGLE_WAIT: Duration = Duration::from_secs(30);

/// The shortest wait, so that a `Retry-After: 0` does not spin.
const MIN_WAIT: Duration = Duration::from_secs(1);

/// Which grant a token request makes: how long it may wait, and what the issuer limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The `authorization_code` grant of a sign-in: the code lives 60 s, so at most 45 s.
    CodeExchange,
    /// The `refresh_token` grant (the kubectl exec plugin): at most 30 s, which kubectl's user
    /// sits through.
    Refresh,
}

impl Grant {
    /// The longest a request of this grant takes in all, its waits and attempts together,
    /// before an issuer asking to wait is answered with an error instead.
    pub fn budget(self) -> Duration {
        match self {
            Grant::CodeExchange => Duration::from_secs(45),
            Grant::Refresh => Duration::from_secs(30),
        }
    }

    /// Whether a `503 temporarily_unavailable` is retried (see the module's documentation).
    fn retries_unavailable(self) -> bool {
        matches!(self, Grant::CodeExchange)
    }

    /// What the issuer's `429` on this grant limits, for the messages.
    pub fn limited(self) -> &'static str {
        match self {
            Grant::CodeExchange => "the sessions this account starts",
            Grant::Refresh => "the refreshes of this session",
        }
    }

    /// Why the issuer asked a request of this grant to wait: a limit (429), or it is
    /// `unavailable` (503).
    pub fn refusal(self, unavailable: bool) -> String {
        if unavailable {
            "the issuer is unavailable for now".to_owned()
        } else {
            format!("the issuer limits {}", self.limited())
        }
    }

    /// What to do when the issuer asks for a longer wait than is left, after `asked`.
    pub fn advice(self, asked: u64) -> String {
        match self {
            Grant::CodeExchange => format!("sign in again in {asked} s"),
            Grant::Refresh => format!("the login is kept: run the command again in {asked} s"),
        }
    }
}

/// What to do with a refused token request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The refusal stands: it is the request's error.
    Fail,
    /// Wait this long, then send the request again.
    Wait(Duration),
    /// The issuer asks for `asked`, more than the `left` this request still waits.
    TooLong {
        /// The wait the issuer asked for.
        asked: Duration,
        /// What is left of the budget (or the longest single wait, when smaller), in whole
        /// seconds.
        left: Duration,
    },
}

/// The seconds of a `Retry-After` in its delay-seconds form (digits only, RFC 9110 10.2.3; more
/// than `u64` holds is `u64::MAX`, far beyond any budget); `None` for the HTTP-date form or
/// anything else.
pub fn parse_retry_after(value: &str) -> Option<u64> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(value.parse().unwrap_or(u64::MAX))
}

/// Whether and how long to wait before sending again a request of `grant` answered `status`
/// with the OAuth `error` (if its body was one) and the `Retry-After` header `retry_after`, when
/// `elapsed` has passed since the request was first sent. Pure.
pub fn decide(
    grant: Grant,
    status: StatusCode,
    error: Option<&str>,
    retry_after: Option<&str>,
    elapsed: Duration,
) -> Decision {
    let retryable = (status == StatusCode::TOO_MANY_REQUESTS && error == Some("slow_down"))
        || (status == StatusCode::SERVICE_UNAVAILABLE
            && grant.retries_unavailable()
            && error == Some("temporarily_unavailable"));
    if !retryable {
        return Decision::Fail;
    }
    let Some(seconds) = retry_after.and_then(parse_retry_after) else {
        return Decision::Fail;
    };
    let asked = Duration::from_secs(seconds).max(MIN_WAIT);
    // In whole seconds, as the issuer asks and as the messages say: a wait may end the request
    // up to half a second past its budget.
    let left = Duration::from_secs_f64(
        grant
            .budget()
            .saturating_sub(elapsed)
            .min(MAX_SINGLE_WAIT)
            .as_secs_f64()
            .round(),
    );
    if asked > left {
        Decision::TooLong { asked, left }
    } else {
        Decision::Wait(asked)
    }
}

/// The error of a request of `grant` to `url` whose `refusal` (answered `status`) asks to wait
/// `asked`, longer than the `left` it still waits.
pub fn wait_too_long(
    grant: Grant,
    url: &str,
    status: StatusCode,
    refusal: AuthError,
    asked: Duration,
    left: Duration,
) -> AuthError {
    let (what, error, description) = match refusal {
        AuthError::OAuth {
            what,
            error,
            description,
            ..
        } => (what, error, description),
        other => return other,
    };
    AuthError::WaitTooLong {
        what,
        url: url.to_owned(),
        grant,
        unavailable: status != StatusCode::TOO_MANY_REQUESTS,
        error,
        description,
        asked: asked.as_secs(),
        left: left.as_secs(),
    }
}

/// The line on stderr before a wait of `wait` asked by a refusal (`status`, the issuer's
/// `error` and `description`, their control characters already escaped). Pure.
pub fn waiting_notice(
    grant: Grant,
    status: StatusCode,
    error: &str,
    description: Option<&str>,
    wait: Duration,
) -> String {
    let description = description.map(|d| format!(": {d}")).unwrap_or_default();
    format!(
        "ichor: {} ({error}{description}); trying again in {} s (this run waits at most {} s in all)",
        grant.refusal(status != StatusCode::TOO_MANY_REQUESTS),
        wait.as_secs(),
        grant.budget().as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn decide_refresh(status: u16, error: Option<&str>, retry_after: Option<&str>, elapsed: u64) -> Decision {
        decide(
            Grant::Refresh,
            StatusCode::from_u16(status).unwrap(),
            error,
            retry_after,
            Duration::from_secs(elapsed),
        )
    }

    #[test]
    fn a_slow_down_within_the_budget_is_waited_for_as_long_as_asked() {
        assert_eq!(
            decide_refresh(429, Some("slow_down"), Some("7"), 0),
            Decision::Wait(7 * SECOND)
        );
        assert_eq!(
            decide(
                Grant::CodeExchange,
                StatusCode::TOO_MANY_REQUESTS,
                Some("slow_down"),
                Some("30"),
                Duration::from_secs(10),
            ),
            Decision::Wait(30 * SECOND),
            "a session start's wait fits the code's life"
        );
        // Exactly what is left is still waited for.
        assert_eq!(
            decide_refresh(429, Some("slow_down"), Some("10"), 20),
            Decision::Wait(10 * SECOND)
        );
    }

    #[test]
    fn a_wait_beyond_what_is_left_is_refused_at_once_saying_both() {
        assert_eq!(
            decide_refresh(429, Some("slow_down"), Some("11"), 20),
            Decision::TooLong {
                asked: 11 * SECOND,
                left: 10 * SECOND
            }
        );
        // What is left counts in whole seconds, the nearest: the time a request took counts.
        let after = |millis| {
            decide(
                Grant::Refresh,
                StatusCode::TOO_MANY_REQUESTS,
                Some("slow_down"),
                Some("10"),
                Duration::from_millis(millis),
            )
        };
        assert_eq!(after(20_400), Decision::Wait(10 * SECOND));
        assert_eq!(
            after(20_600),
            Decision::TooLong {
                asked: 10 * SECOND,
                left: 9 * SECOND
            }
        );
        assert!(matches!(
            decide_refresh(429, Some("slow_down"), Some("60"), 0),
            Decision::TooLong { left, .. } if left == 30 * SECOND
        ));
        // The family's cap at one write a minute: longer than the whole budget.
        assert_eq!(
            decide_refresh(429, Some("slow_down"), Some("60"), 0),
            Decision::TooLong {
                asked: 60 * SECOND,
                left: 30 * SECOND
            }
        );
        // Past the budget, any wait is too long.
        assert!(matches!(
            decide_refresh(429, Some("slow_down"), Some("1"), 31),
            Decision::TooLong { left, .. } if left == Duration::ZERO
        ));
    }

    #[test]
    fn no_single_wait_is_longer_than_the_cap_even_within_the_budget() {
        assert_eq!(
            decide(
                Grant::CodeExchange,
                StatusCode::TOO_MANY_REQUESTS,
                Some("slow_down"),
                Some("31"),
                Duration::ZERO,
            ),
            Decision::TooLong {
                asked: 31 * SECOND,
                left: MAX_SINGLE_WAIT
            }
        );
        assert_eq!(
            decide(
                Grant::CodeExchange,
                StatusCode::TOO_MANY_REQUESTS,
                Some("slow_down"),
                Some("20"),
                Duration::from_secs(30),
            ),
            Decision::TooLong {
                asked: 20 * SECOND,
                left: 15 * SECOND
            },
            "the code exchange stops at 45 s in all, well within the code's 60 s life"
        );
    }

    #[test]
    fn a_zero_wait_is_one_second_so_the_budget_ends_the_retries() {
        assert_eq!(
            decide_refresh(429, Some("slow_down"), Some("0"), 0),
            Decision::Wait(SECOND)
        );
        assert!(matches!(
            decide_refresh(429, Some("slow_down"), Some("0"), 30),
            Decision::TooLong { .. }
        ));
    }

    #[test]
    fn a_missing_or_unreadable_retry_after_is_not_retried() {
        for value in [
            None,
            Some(""),
            Some("soon"),
            Some("-5"),
            Some("1.5"),
            Some("+3"),
            Some("Wed, 21 Oct 2026 07:28:00 GMT"),
        ] {
            assert_eq!(
                decide_refresh(429, Some("slow_down"), value, 0),
                Decision::Fail,
                "{value:?}"
            );
        }
        assert_eq!(parse_retry_after(" 5 "), Some(5));
        // More than a u64 holds: far beyond any budget, and refused as such.
        assert_eq!(parse_retry_after("99999999999999999999999"), Some(u64::MAX));
        assert!(matches!(
            decide_refresh(429, Some("slow_down"), Some("99999999999999999999999"), 0),
            Decision::TooLong { .. }
        ));
    }

    #[test]
    fn an_unavailable_issuer_is_waited_for_by_the_code_exchange_only() {
        let code = |error: Option<&str>| {
            decide(
                Grant::CodeExchange,
                StatusCode::SERVICE_UNAVAILABLE,
                error,
                Some("5"),
                Duration::ZERO,
            )
        };
        assert_eq!(code(Some("temporarily_unavailable")), Decision::Wait(5 * SECOND));
        assert_eq!(
            code(None),
            Decision::Fail,
            "a 503 that is not the issuer's OAuth answer may come from a proxy after the code was spent"
        );
        assert_eq!(code(Some("server_error")), Decision::Fail);
        assert_eq!(
            decide_refresh(503, Some("temporarily_unavailable"), Some("5"), 0),
            Decision::Fail,
            "a refresh answered 503 may have been rotated already"
        );
    }

    #[test]
    fn a_429_without_the_issuers_slow_down_is_not_retried() {
        // A proxy's 429 may have passed the request on: the refresh token may be spent.
        for error in [None, Some("rate_limited"), Some("invalid_grant")] {
            assert_eq!(
                decide_refresh(429, error, Some("1"), 0),
                Decision::Fail,
                "{error:?}"
            );
        }
        assert_eq!(
            decide_refresh(429, Some("slow_down"), Some("1"), 0),
            Decision::Wait(Duration::from_secs(1))
        );
    }

    #[test]
    fn other_refusals_are_never_retried() {
        for status in [400, 401, 403, 404, 413, 500, 502, 504] {
            assert_eq!(
                decide_refresh(status, Some("invalid_grant"), Some("1"), 0),
                Decision::Fail,
                "{status}"
            );
            assert_eq!(
                decide(
                    Grant::CodeExchange,
                    StatusCode::from_u16(status).unwrap(),
                    Some("temporarily_unavailable"),
                    Some("1"),
                    Duration::ZERO,
                ),
                Decision::Fail,
                "{status}"
            );
        }
    }

    const URL: &str = "https://i.example/oidc/token";

    fn slow_down(description: &str) -> (String, Option<String>) {
        let body = serde_json::json!({"error": "slow_down", "error_description": description}).to_string();
        match super::super::oidc::oauth_error(
            "token request",
            URL,
            StatusCode::TOO_MANY_REQUESTS,
            body.as_bytes(),
        ) {
            AuthError::OAuth {
                error, description, ..
            } => (error, description),
            other => panic!("{other}"),
        }
    }

    /// Each wait is one line on stderr naming what the issuer limits and for how long, the
    /// issuer's own text escaped.
    #[test]
    fn a_wait_is_announced_in_one_line_naming_what_is_limited() {
        let (error, description) = slow_down("too many requests\nERROR: forged");
        let line = waiting_notice(
            Grant::Refresh,
            StatusCode::TOO_MANY_REQUESTS,
            &error,
            description.as_deref(),
            Duration::from_secs(7),
        );
        assert_eq!(
            line,
            r"ichor: the issuer limits the refreshes of this session (slow_down: too many requests\nERROR: forged); trying again in 7 s (this run waits at most 30 s in all)"
        );
        let line = waiting_notice(
            Grant::CodeExchange,
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            None,
            Duration::from_secs(5),
        );
        assert_eq!(
            line,
            "ichor: the issuer is unavailable for now (temporarily_unavailable); trying again in 5 s (this run waits at most 45 s in all)"
        );
    }

    /// A wait longer than is left fails at once, saying how long the issuer asked for, what it
    /// limits and when to try again, on one line.
    #[test]
    fn a_wait_beyond_the_budget_is_an_error_saying_what_and_how_long() {
        let (error, description) = slow_down("too many requests; wait before trying again\r");
        let refusal = AuthError::OAuth {
            what: "token request",
            url: URL.into(),
            error,
            description,
        };
        let err = wait_too_long(
            Grant::Refresh,
            URL,
            StatusCode::TOO_MANY_REQUESTS,
            refusal,
            Duration::from_secs(60),
            Duration::from_secs(29),
        );
        assert!(matches!(
            err,
            AuthError::WaitTooLong {
                asked: 60,
                left: 29,
                ..
            }
        ));
        insta::assert_snapshot!(err.to_string(), @r"token request at https://i.example/oidc/token: the issuer limits the refreshes of this session (slow_down: too many requests; wait before trying again\r): it asks to wait 60 s before trying again, longer than the 29 s this run still waits; the login is kept: run the command again in 60 s");

        let refusal = AuthError::OAuth {
            what: "token request",
            url: URL.into(),
            error: "slow_down".into(),
            description: None,
        };
        let err = wait_too_long(
            Grant::CodeExchange,
            URL,
            StatusCode::TOO_MANY_REQUESTS,
            refusal,
            Duration::from_secs(31),
            Duration::from_secs(30),
        );
        insta::assert_snapshot!(err.to_string(), @"token request at https://i.example/oidc/token: the issuer limits the sessions this account starts (slow_down): it asks to wait 31 s before trying again, longer than the 30 s this run still waits; sign in again in 31 s");
    }
}
