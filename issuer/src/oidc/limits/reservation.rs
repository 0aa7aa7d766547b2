//! [`SourceToken`]: one request's reserved token in its source's bucket, given back when the
//! request turns out not to be a failure.

use std::{net::IpAddr, sync::Mutex};

use jiff::{SignedDuration, Timestamp};

use super::buckets::{SourceKey, TokenBuckets};
use crate::oidc::lock;

/// A token reserved in the failure bucket of a request's source before the request's work.
///
/// Dropped, it is given back: a request is charged only by [`SourceToken::charge`], when its
/// answer says it failed. Reserving first means concurrent requests cannot all pass a bucket
/// before any of them is charged; giving back on drop means a valid request (or one cancelled, or
/// refused for a reason that is no client's fault) costs its source nothing.
#[derive(Debug)]
pub struct SourceToken<'a> {
    buckets: &'a Mutex<TokenBuckets<SourceKey>>,
    key: SourceKey,
    at: Timestamp,
    charged: bool,
}

impl<'a> SourceToken<'a> {
    /// Reserves a token for `source` in `buckets` at `now`, or says how long to wait.
    ///
    /// # Errors
    /// The bucket is empty: the time until it holds a token again.
    pub fn reserve(
        buckets: &'a Mutex<TokenBuckets<SourceKey>>,
        source: IpAddr,
        now: Timestamp,
    ) -> Result<Self, SignedDuration> {
        let key = SourceKey::of(source);
        lock(buckets).reserve(key, now)?;
        Ok(SourceToken {
            buckets,
            key,
            at: now,
            charged: false,
        })
    }

    /// Keeps the token taken: the request failed.
    pub fn charge(mut self) {
        self.charged = true;
    }
}

impl Drop for SourceToken<'_> {
    fn drop(&mut self) {
        if !self.charged {
            lock(self.buckets).refund(&self.key, self.at);
        }
    }
}
