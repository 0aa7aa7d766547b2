//! The paced part of the mixed workload: one task per slot of an endpoint class, each sending
//! its class's request at its pace until the phase's deadline, and the [`Record`] of what was
//! answered.

use crate::client::{PASSWORD, PER_ADDRESS, sign_in_tokens, source};
use anyhow::{Context as _, Result};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Latencies of successful requests, counts of failures and of sign-ins shed by a full
/// password queue (503 with Retry-After: the answer the issuer gives by design under a
/// flood, not an error), by class.
#[derive(Default)]
pub(crate) struct Record {
    pub(crate) ok: BTreeMap<&'static str, Vec<Duration>>,
    pub(crate) errors: BTreeMap<&'static str, BTreeMap<String, usize>>,
    pub(crate) shed: BTreeMap<&'static str, usize>,
}

impl Record {
    pub(crate) fn merge(&mut self, other: Record) {
        for (k, n) in other.shed {
            *self.shed.entry(k).or_default() += n;
        }
        for (k, v) in other.ok {
            self.ok.entry(k).or_default().extend(v);
        }
        for (k, v) in other.errors {
            let e = self.errors.entry(k).or_default();
            for (m, n) in v {
                *e.entry(m).or_default() += n;
            }
        }
    }
    fn error(&mut self, class: &'static str, message: String) {
        let m: String = message.chars().take(100).collect();
        *self.errors.entry(class).or_default().entry(m).or_default() += 1;
    }
}

/// Whether an error is the issuer shedding a sign-in: 503 `temporarily_unavailable`
/// because the password queue is full.
pub(crate) fn is_shed(error: &str) -> bool {
    error.starts_with("HTTP 503") && error.contains("is busy")
}

/// A gRPC-web frame: flag, big-endian length, payload.
fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The `grpc-status` of a gRPC-web answer (header, or the trailer frame of the body).
fn grpc_status(headers: &reqwest::header::HeaderMap, body: &[u8]) -> Option<String> {
    if let Some(v) = headers.get("grpc-status") {
        return v.to_str().ok().map(str::to_owned);
    }
    let mut rest = body;
    while rest.len() >= 5 {
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let payload = rest.get(5..5 + len)?;
        if rest[0] & 0x80 != 0 {
            let text = String::from_utf8_lossy(payload);
            return text
                .lines()
                .find_map(|l| l.strip_prefix("grpc-status:").map(|v| v.trim().to_owned()));
        }
        rest = &rest[5 + len..];
    }
    None
}

async fn get_ok(http: &reqwest::Client, url: String) -> Result<()> {
    let r = http.get(url).send().await?;
    let status = r.status();
    r.bytes().await?;
    anyhow::ensure!(status.is_success(), "HTTP {status}");
    Ok(())
}

/// What one request of a task needs that outlives the request.
pub(crate) struct Task {
    pub(crate) class: &'static str,
    pub(crate) http: reqwest::Client,
    pub(crate) issuers: Arc<Vec<String>>,
    pub(crate) refresh_token: String,
    pub(crate) id_token: String,
    pub(crate) n: usize,
    pub(crate) source_base: usize,
}

impl Task {
    async fn once(&mut self, record: &mut Record) {
        let issuer = self.issuers[self.n % self.issuers.len()].clone();
        let from = source(self.source_base + self.n / PER_ADDRESS);
        self.n += 1;
        let t = Instant::now();
        let result = match self.class {
            "discovery" => get_ok(&self.http, format!("{issuer}/.well-known/openid-configuration")).await,
            "jwks" => get_ok(&self.http, format!("{issuer}/oidc/jwks")).await,
            "refresh" => self.refresh(&issuer, &from).await,
            "whoami (gRPC-web)" => self.whoami(&issuer).await,
            _ => {
                let user = format!("bench-{}", self.n % 40);
                sign_in_tokens(
                    &self.http,
                    &issuer,
                    &user,
                    PASSWORD,
                    ichor_renderers::contract::KUBE_AUDIENCE,
                    &from,
                )
                .await
                .map(|_| ())
            }
        };
        match result {
            Ok(()) => record.ok.entry(self.class).or_default().push(t.elapsed()),
            Err(e) if is_shed(&e.to_string()) => *record.shed.entry(self.class).or_default() += 1,
            Err(e) => record.error(self.class, e.to_string()),
        }
    }

    async fn refresh(&mut self, issuer: &str, from: &str) -> Result<()> {
        let r = self
            .http
            .post(format!("{issuer}/oidc/token"))
            .header("x-forwarded-for", from)
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", self.refresh_token.as_str()),
                ("client_id", ichor_renderers::contract::CLI_CLIENT_ID),
            ])
            .send()
            .await?;
        let status = r.status();
        let body = r.text().await?;
        anyhow::ensure!(status.is_success(), "HTTP {status}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        v["refresh_token"]
            .as_str()
            .context("no refresh_token")?
            .clone_into(&mut self.refresh_token);
        Ok(())
    }

    async fn whoami(&self, issuer: &str) -> Result<()> {
        let r = self
            .http
            .post(format!("{issuer}/ichor.v1alpha1.UserService/WhoAmI"))
            .header("content-type", "application/grpc-web+proto")
            .header("x-grpc-web", "1")
            .header("authorization", format!("Bearer {}", self.id_token))
            .body(frame(0, &[]))
            .send()
            .await?;
        let status = r.status();
        let headers = r.headers().clone();
        let body = r.bytes().await?;
        anyhow::ensure!(status.is_success(), "HTTP {status}");
        let grpc = grpc_status(&headers, &body);
        anyhow::ensure!(grpc.as_deref() == Some("0"), "grpc-status {grpc:?}");
        Ok(())
    }
}

/// Runs one paced task until `deadline`.
pub(crate) async fn paced(mut task: Task, every: Duration, deadline: Instant) -> (Task, Record) {
    let mut record = Record::default();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if Instant::now() >= deadline {
            break;
        }
        task.once(&mut record).await;
    }
    (task, record)
}
