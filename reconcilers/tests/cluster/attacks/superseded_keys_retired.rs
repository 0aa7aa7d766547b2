//! A superseded signing key must leave `keys.json` (and so every issuer's JWKS) at its
//! `retireAfter`; one that stays is a key an old leak keeps useful. The timeline is shortened by
//! dating keys back: beside the controller's own fresh keys, the Secret gets an RSA and an HMAC
//! key retired a day ago and an RSA key superseded forty days ago with no `retireAfter` yet.
//! Under the chart's RBAC, the controller drops the retired ones and dates the superseded one,
//! a write of `keys.json` alone (no key generated).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ichor_renderers::trust::{KEYS_JSON, SIGNING_SECRET};
use ichor_testkit::wait;
use serde_json::{Value, json};

use super::{Running, SETTLE};
use crate::replicas::get;

fn keys_json(running: &Running) -> anyhow::Result<Value> {
    let secret = get(&running.plane, 0, "secret", SIGNING_SECRET)?
        .ok_or_else(|| anyhow::anyhow!("no {SIGNING_SECRET}"))?;
    let b64 = secret["data"][KEYS_JSON]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("{SIGNING_SECRET} has no {KEYS_JSON}"))?;
    Ok(serde_json::from_slice(&STANDARD.decode(b64)?)?)
}

fn kids(doc: &Value, list: &str) -> Vec<String> {
    doc[list]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["kid"].as_str().map(str::to_owned))
        .collect()
}

#[test]
#[ignore = "needs the control plane: hack/kube/build.sh"]
fn keys_past_their_retirement_leave_the_signing_secret_under_the_charts_rbac() -> anyhow::Result<()> {
    let Some(running) = Running::start(&[])? else {
        return Ok(());
    };
    let plane = &running.plane;
    let mut doc = keys_json(&running)?;
    let rsa = doc["keys"][0].clone();
    let hmac = doc["hmac"][0].clone();
    anyhow::ensure!(
        rsa.is_object() && hmac.is_object(),
        "the controller's first keys: {doc}"
    );
    let now = jiff::Timestamp::now();
    let ago = |hours: i64| {
        jiff::Timestamp::from_second(now.as_second() - hours * 3600)
            .unwrap()
            .to_string()
    };
    let retired_rsa = json!({"kid": "k-19990101-0000", "alg": "RS256", "pem": rsa["pem"],
        "createdAt": ago(24 * 60), "activeFrom": ago(24 * 60), "retireAfter": ago(24)});
    let superseded = json!({"kid": "k-19990201-0000", "alg": "RS256", "pem": rsa["pem"],
        "createdAt": ago(24 * 40), "activeFrom": ago(24 * 40)});
    let retired_hmac = json!({"kid": "h-19990101-0000", "secret": hmac["secret"],
        "createdAt": ago(24 * 60), "activeFrom": ago(24 * 60), "retireAfter": ago(24)});
    doc["keys"]
        .as_array_mut()
        .unwrap()
        .extend([retired_rsa, superseded]);
    doc["hmac"].as_array_mut().unwrap().push(retired_hmac);
    let patch = json!({"data": {KEYS_JSON: STANDARD.encode(doc.to_string())}});
    plane.kubectl_run(
        &[
            "patch",
            "secret",
            SIGNING_SECRET,
            "-n",
            ichor_testkit::install::NAMESPACE,
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
        None,
    )?;

    let settled = wait::until(
        "the retired keys dropped and the superseded one dated",
        SETTLE,
        || {
            let doc = keys_json(&running)?;
            let rsa = kids(&doc, "keys");
            let hmac = kids(&doc, "hmac");
            let superseded = doc["keys"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|k| k["kid"] == "k-19990201-0000");
            let done = !rsa.iter().any(|k| k == "k-19990101-0000")
                && !hmac.iter().any(|k| k == "h-19990101-0000")
                && superseded.is_none_or(|k| k["retireAfter"].is_string());
            Ok(done.then_some(doc))
        },
    );
    let doc = settled.map_err(|e| e.context(running.replica.log_tail()))?;
    // Nothing was generated for it: the controller's own keys are the ones it started with.
    assert!(
        kids(&doc, "keys").contains(&rsa["kid"].as_str().unwrap_or_default().to_owned()),
        "{doc}"
    );
    assert!(
        kids(&doc, "hmac").contains(&hmac["kid"].as_str().unwrap_or_default().to_owned()),
        "{doc}"
    );
    Ok(())
}
