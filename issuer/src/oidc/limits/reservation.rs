//! [`SourceToken`]: one request's token in its source's failure bucket, taken for good only when
//! the request turns out to be a failure.

use std::{net::IpAddr, sync::Mutex};

use jiff::{SignedDuration, Timestamp};

use super::buckets::{SourceKey, TokenBuckets};
use crate::oidc::lock;

/// A request's token in the failure bucket of its source.
///
/// [`SourceToken::reserve`] takes it before the request's work, or refuses the request when the
/// bucket is empty; dropped, the token is given back: a request is charged only by
/// [`SourceToken::charge`], when its answer says it failed. Reserving first means concurrent
/// requests cannot all pass a bucket before any of them is charged; giving back on drop means a
/// valid request (or one cancelled, or refused for a reason that is no client's fault) costs its
/// source nothing.
///
/// [`SourceToken::exempt`] is for a request the bucket must not refuse because it proved
/// something an attacker cannot forge (its artifact's MAC verified, or it carries a device
/// cookie of the user it signs in as): it reserves nothing, and a charge takes a token if the
/// bucket has one, so such failures still count against the source but garbage from the same
/// address cannot lock the request out.
#[derive(Debug)]
pub struct SourceToken<'a> {
    buckets: &'a Mutex<TokenBuckets<SourceKey>>,
    key: SourceKey,
    at: Timestamp,
    reserved: bool,
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
            reserved: true,
            charged: false,
        })
    }

    /// A token for a request `buckets` never refuses: nothing is taken unless it is charged.
    pub fn exempt(buckets: &'a Mutex<TokenBuckets<SourceKey>>, source: IpAddr, now: Timestamp) -> Self {
        SourceToken {
            buckets,
            key: SourceKey::of(source),
            at: now,
            reserved: false,
            charged: false,
        }
    }

    /// The request failed: its reserved token stays taken (an exempt one takes a token if the
    /// bucket has one).
    pub fn charge(mut self) {
        self.charged = true;
        if !self.reserved {
            lock(self.buckets).spend(self.key, self.at);
        }
    }
}

impl Drop for SourceToken<'_> {
    fn drop(&mut self) {
        if self.reserved && !self.charged {
            lock(self.buckets).refund(&self.key, self.at);
        }
    }
}
