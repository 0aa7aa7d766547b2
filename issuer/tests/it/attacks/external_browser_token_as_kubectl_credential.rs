//! The site's provider turned on with one client for everything (the chart's old default: an
//! empty `kubeClientID` meant the UI's `clientID`): the kube-apiserver then trusts the audience
//! of the ID token a browser tab holds for the UI, so that token — readable by any script in the
//! page, kept in `sessionStorage` — is a `kubectl` credential too, which Ichor's own tokens never
//! are (`ichor-ui` and `ichor-kube` are distinct audiences).
//!
//! The attack's steps are the configuration that allows it: the issuer started with no
//! `--external-kube-client-id`, or with the UI's client as it, and a cluster whose entry for
//! the provider lists the UI's client among its audiences. The issuer refuses to start with
//! either flag set, and reports the cluster's entry as not matching (`externalTrust: differs`,
//! logged, shown by the UI).

use ichor_issuer::external::provider::{ProviderError, ProviderInput};
use ichor_issuer::external::trust::{TrustCheck, compare};
use ichor_renderers::crd::ExternalIssuerSpec;

const ICHOR: &str = "https://ichor.example.com";
const IDP: &str = "https://idp.example.com";

fn flags(kube_client_id: Option<&str>) -> ProviderInput {
    ProviderInput {
        issuer_url: Some(IDP.to_owned()),
        client_id: Some("ichor-ui".to_owned()),
        kube_client_id: kube_client_id.map(str::to_owned),
        ..ProviderInput::default()
    }
}

#[test]
fn the_issuer_refuses_to_start_when_the_uis_client_would_be_the_kube_apiservers() {
    for kube_client_id in [None, Some("ichor-ui")] {
        assert_eq!(
            flags(kube_client_id).validate(ICHOR),
            Err(ProviderError::KubeClientId("ichor-ui".to_owned())),
            "--external-kube-client-id {kube_client_id:?}"
        );
    }
    let provider = flags(Some("kubernetes")).validate(ICHOR).unwrap().unwrap();
    assert_eq!(
        (provider.client_id.as_str(), provider.kube_client_id.as_str()),
        ("ichor-ui", "kubernetes")
    );

    // A cluster that also accepts the UI's client: flagged, naming it.
    let entry = |audiences: &[&str]| ExternalIssuerSpec {
        issuer_url: IDP.to_owned(),
        audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
        ..ExternalIssuerSpec::default()
    };
    assert_eq!(compare(&provider, &[entry(&["kubernetes"])]), TrustCheck::Matches);
    match compare(&provider, &[entry(&["kubernetes", "ichor-ui"])]) {
        TrustCheck::Differs(why) => assert!(
            why.contains("\"ichor-ui\", the UI's client") && why.contains("kubectl credential"),
            "{why}"
        ),
        other => panic!("a cluster accepting the UI's client was {other:?}"),
    }
}
