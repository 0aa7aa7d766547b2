//! The faults an operator meets, on the walkthrough's installation: the controller leader's pod
//! deleted, an issuer pod deleted while clients refresh, and the issuer Service recreated with a
//! new ClusterIP. Each is measured for the record.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ichor_testkit::wait;
use serde_json::Value;

use super::cluster::{Admin, NAMESPACE, Record};

/// The controller's Lease (its holder is the leader's pod).
const LEASE: &str = "ichor-controller";
/// How long a fault may take to heal.
const HEAL: Duration = Duration::from_secs(240);

fn holder(admin: &Admin) -> anyhow::Result<Option<String>> {
    Ok(admin
        .get("lease", LEASE)?
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
        .filter(|h| !h.is_empty()))
}

/// The leader's pod is deleted: the other replica takes the Lease, and the graph's writes go on
/// (the trust ConfigMap, deleted, is written back by the new leader).
pub fn leader_pod_deleted(admin: &Admin, record: &mut Record) -> anyhow::Result<()> {
    let old = wait::until("a controller leader", HEAL, || holder(admin))?;
    let started = Instant::now();
    admin.run(&["delete", "pod", &old, "-n", NAMESPACE, "--wait=false"], None)?;
    let new = wait::until("another replica to lead", HEAL, || {
        Ok(holder(admin)?.filter(|h| *h != old))
    })?;
    record.figure(
        "leader failover (pod deleted to Lease taken)",
        format!("{:.1} s ({old} -> {new})", started.elapsed().as_secs_f64()),
    );
    admin.run(
        &["delete", "configmap", "ichor-oidc-trust", "-n", NAMESPACE],
        None,
    )?;
    let deleted = Instant::now();
    wait::until("the new leader to write the trust ConfigMap again", HEAL, || {
        admin.get("configmap", "ichor-oidc-trust")
    })?;
    record.figure(
        "trust ConfigMap written back by the new leader",
        format!("{:.1} s", deleted.elapsed().as_secs_f64()),
    );
    admin.wait_ready("ichor-controller", HEAL)?;
    Ok(())
}

/// One refresh grant at the issuer `base` with a connection of its own (as each exec-plugin
/// run makes); the next refresh token.
async fn refresh(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<String> {
    Ok(refresh_tokens(http, base, token).await?.0)
}

/// One refresh grant: the next refresh token and the new ID token.
async fn refresh_tokens(http: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<(String, String)> {
    let answer = http
        .post(format!("{base}/oidc/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", "ichor-cli"),
        ])
        .send()
        .await?;
    let status = answer.status();
    let body: Value = answer.json().await?;
    ensure!(status.is_success(), "refresh answered {status}: {body}");
    let next = body["refresh_token"]
        .as_str()
        .map(str::to_owned)
        .context("no refresh_token in the answer")?;
    let id = body["id_token"]
        .as_str()
        .map(str::to_owned)
        .context("no id_token in the answer")?;
    Ok((next, id))
}

/// An issuer pod is deleted while a client keeps refreshing: no refresh fails.
pub fn issuer_pod_deleted_mid_refresh(
    admin: &Admin,
    runtime: &tokio::runtime::Runtime,
    client: impl Fn() -> anyhow::Result<reqwest::Client> + Send + Sync + 'static,
    base: &str,
    refresh_token: String,
    record: &mut Record,
) -> anyhow::Result<()> {
    let victim = admin
        .pods("issuer")?
        .into_iter()
        .next()
        .context("no issuer pod")?;
    let stop = Arc::new(AtomicBool::new(false));
    let base = base.to_owned();
    let loop_stop = Arc::clone(&stop);
    let refreshing = runtime.spawn(async move {
        let (mut ok, mut failed) = (0_u32, Vec::new());
        let mut token = refresh_token;
        while !loop_stop.load(Ordering::Acquire) {
            let attempt = async { refresh(&client()?, &base, &token).await }.await;
            match attempt {
                Ok(next) => {
                    token = next;
                    ok += 1;
                }
                Err(e) => failed.push(format!("{e:#}")),
            }
            // A client refreshing every half second: well inside a session's write cap (20
            // rotations at once, then one every 10 s per replica) over the step's seconds.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        (ok, failed)
    });
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    admin.run(&["delete", "pod", &victim, "-n", NAMESPACE, "--wait=true"], None)?;
    admin.wait_ready("ichor-issuer", HEAL)?;
    let replaced = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Release);
    let (ok, failed) = runtime.block_on(refreshing)?;
    record.figure(
        "issuer pod deleted mid-refresh",
        format!(
            "{ok} refreshes, {} failed, replacement ready after {:.1} s",
            failed.len(),
            replaced.as_secs_f64()
        ),
    );
    ensure!(
        failed.is_empty() && ok > 10,
        "refreshes failed while an issuer pod was replaced ({ok} succeeded): {failed:?}"
    );
    Ok(())
}

/// The issuer Service is deleted and created again (a new ClusterIP): the controller issues a
/// leaf for the new address and renders a new discoveryURL; the new ClusterIP, once the
/// rollout ran again.
pub fn issuer_service_recreated(admin: &Admin, record: &mut Record) -> anyhow::Result<IpAddr> {
    let old = admin.cluster_ip("ichor-issuer")?;
    let mut svc = admin
        .get("service", "ichor-issuer")?
        .context("no issuer Service")?;
    for field in ["resourceVersion", "uid", "creationTimestamp", "managedFields"] {
        if let Some(m) = svc["metadata"].as_object_mut() {
            m.remove(field);
        }
    }
    if let Some(spec) = svc["spec"].as_object_mut() {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
    if let Some(o) = svc.as_object_mut() {
        o.remove("status");
    }
    let started = Instant::now();
    // The allocator picks a free address at random, the one just freed included (about one
    // draw in 240 on the node's /24): drawn again until the address is another one.
    let mut new = old;
    for _ in 0..5 {
        admin.run(&["delete", "service", "ichor-issuer", "-n", NAMESPACE], None)?;
        admin.apply(&serde_json::to_string(&svc)?)?;
        new = admin.cluster_ip("ichor-issuer")?;
        if new != old {
            break;
        }
    }
    ensure!(
        new != old,
        "the recreated Service kept its ClusterIP {old} five times"
    );
    let discovery = format!("https://{new}:8444");
    wait::until("the trust ConfigMap to name the new ClusterIP", HEAL, || {
        Ok(admin
            .get("configmap", "ichor-oidc-trust")?
            .filter(|c| c.to_string().contains(&discovery)))
    })?;
    record.figure(
        "new ClusterIP to new leaf and discoveryURL",
        format!("{:.1} s ({old} -> {new})", started.elapsed().as_secs_f64()),
    );
    Ok(new)
}

/// The signing keys document of `ichor-oidc-signing`, with the Secret's resourceVersion.
fn signing_keys(admin: &Admin) -> anyhow::Result<(Value, String)> {
    use base64::Engine as _;
    let secret = admin
        .get("secret", "ichor-oidc-signing")?
        .context("no Secret ichor-oidc-signing")?;
    let b64 = secret["data"]["keys.json"]
        .as_str()
        .context("ichor-oidc-signing has no keys.json")?;
    let doc = serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(b64)?)?;
    let version = secret["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok((doc, version))
}

/// The RSA kids of a keys document, and the newest one's index.
fn rsa_kids(doc: &Value) -> (Vec<String>, Option<usize>) {
    let keys = doc["keys"].as_array().cloned().unwrap_or_default();
    let kids = keys
        .iter()
        .filter_map(|k| k["kid"].as_str().map(str::to_owned))
        .collect();
    let newest = keys
        .iter()
        .enumerate()
        .max_by_key(|(_, k)| k["createdAt"].as_str().unwrap_or_default().to_owned())
        .map(|(i, _)| i);
    (kids, newest)
}

/// The `kid` of a JWT's header.
fn kid_of(jwt: &str) -> anyhow::Result<String> {
    use base64::Engine as _;
    let header = jwt.split('.').next().context("not a JWT")?;
    let header: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header)?)?;
    header["kid"]
        .as_str()
        .map(str::to_owned)
        .context("no kid in the JWT header")
}

/// A signing-key rotation on a shortened timeline: the newest RSA key's `createdAt` is moved 31
/// days back (its 30-day period over, as if a month had passed), the controller generates the
/// next key, published the install's lead (1 minute) before it signs; the new key reaches every
/// issuer pod through the kubelet's Secret-volume sync (the lag measured per pod), and ID tokens
/// refreshed every second across the switch all verify at the kube-apiserver (`verify`), the
/// new key's included.
pub fn signing_key_rotation(
    admin: &Admin,
    runtime: &tokio::runtime::Runtime,
    client_to: impl Fn(SocketAddr) -> anyhow::Result<reqwest::Client>,
    base: &str,
    mut refresh_token: String,
    verify: impl Fn(&str) -> anyhow::Result<()>,
    record: &mut Record,
) -> anyhow::Result<()> {
    use base64::Engine as _;
    let port: u16 = base
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .context("the issuer URL names no port")?;
    let (mut doc, _) = signing_keys(admin)?;
    let (before, newest) = rsa_kids(&doc);
    let newest = newest.context("no RSA key in ichor-oidc-signing")?;
    let month_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(31 * 24);
    doc["keys"][newest]["createdAt"] = Value::from(month_ago.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    let encoded = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&doc)?);
    let patch = serde_json::json!({"data": {"keys.json": encoded}}).to_string();
    admin.run(
        &[
            "patch",
            "secret",
            "ichor-oidc-signing",
            "-n",
            NAMESPACE,
            "--type=merge",
            "-p",
            &patch,
        ],
        None,
    )?;
    let started = Instant::now();
    let (new_kid, active_from) = wait::until("the controller to generate the next key", HEAL, || {
        let (doc, _) = signing_keys(admin)?;
        Ok(doc["keys"].as_array().and_then(|keys| {
            keys.iter()
                .find(|k| {
                    k["kid"]
                        .as_str()
                        .is_some_and(|kid| !before.iter().any(|b| b == kid))
                })
                .map(|k| {
                    (
                        k["kid"].as_str().unwrap_or_default().to_owned(),
                        k["activeFrom"].as_str().unwrap_or_default().to_owned(),
                    )
                })
        }))
    })?;
    let written = Instant::now();
    record.figure(
        "next signing key generated after the old one's period ran out",
        format!(
            "{:.1} s ({new_kid}, signs from {active_from})",
            started.elapsed().as_secs_f64()
        ),
    );
    let active_at: jiff::Timestamp = active_from.parse()?;
    let pods = admin.run(
        &[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "app.kubernetes.io/component=issuer",
            "-o",
            "jsonpath={.items[*].status.podIP}",
        ],
        None,
    )?;
    let pods: Vec<IpAddr> = pods
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    ensure!(!pods.is_empty(), "no issuer pod IP");
    // Tokens across the switch, and each pod's JWKS, until the new key has signed a while.
    let mut lags = vec![None; pods.len()];
    let (mut verified, mut failed, mut kids) = (0_u32, Vec::new(), std::collections::BTreeSet::new());
    // Refreshes held back by the session's write cap (20 rotations, then one every 10 s per
    // replica): this client asks every second, far more often than a session needs, and waits.
    let mut held = 0_u32;
    while jiff::Timestamp::now() < active_at + jiff::SignedDuration::from_secs(20)
        || lags.iter().any(Option::is_none)
    {
        ensure!(
            started.elapsed() < HEAL,
            "the rotation did not complete within {HEAL:?}: pods' JWKS {lags:?}"
        );
        for (i, pod) in pods.iter().enumerate() {
            if lags[i].is_none() {
                let jwks = runtime.block_on(async {
                    let answer = client_to(SocketAddr::new(*pod, port))?
                        .get(format!("{base}/oidc/jwks"))
                        .send()
                        .await?;
                    anyhow::Ok(answer.text().await?)
                });
                if jwks.is_ok_and(|j| j.contains(&new_kid)) {
                    lags[i] = Some(written.elapsed());
                }
            }
        }
        let fresh = runtime.block_on(async {
            refresh_tokens(&client_to(SocketAddr::new(pods[0], port))?, base, &refresh_token).await
        });
        match fresh {
            Ok((next, id_token)) => {
                refresh_token = next;
                let kid = kid_of(&id_token)?;
                match verify(&id_token) {
                    Ok(()) => {
                        verified += 1;
                        kids.insert(kid);
                    }
                    Err(e) => failed.push(format!("{kid}: {e:#}")),
                }
            }
            Err(e) if format!("{e:#}").contains("refresh answered 429 Too Many Requests") => held += 1,
            Err(e) => failed.push(format!("refresh: {e:#}")),
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let lags: Vec<String> = lags
        .iter()
        .flatten()
        .map(|d| format!("{:.1} s", d.as_secs_f64()))
        .collect();
    record.figure(
        "new key in each issuer pod's JWKS after its write (Secret-volume sync)",
        lags.join(", "),
    );
    record.figure(
        "ID tokens verified across the switch",
        format!(
            "{verified}, {} failed, {held} held by the write cap, kids {kids:?}",
            failed.len()
        ),
    );
    ensure!(
        failed.is_empty(),
        "tokens failed across the key switch: {failed:?}"
    );
    ensure!(
        kids.contains(&new_kid),
        "no token signed by the new key {new_kid} was verified: {kids:?}"
    );
    Ok(())
}
