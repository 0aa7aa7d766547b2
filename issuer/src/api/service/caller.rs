//! The `UserService` calls about the caller itself: `GetMyKubeconfig` (a kubeconfig for the
//! configured cluster, signing in through the exec plugin) and `WhoAmI`.

use std::sync::Arc;
use tonic::Request;

use super::{Gate, UserApi};
use crate::api::{
    access::{self, AccessReview},
    auth::BearerVerifier,
    backend::UserBackend,
    error::ApiError,
    kubeconfig::{self, KubeconfigInput},
    proto::{GetMyKubeconfigRequest, GetMyKubeconfigResponse, WhoAmIRequest, WhoAmIResponse},
    validate,
};
use crate::talos_cluster::{ServerSource, choose_server};

impl<B, A, V> UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    pub(super) async fn get_my_kubeconfig_impl(
        &self,
        request: Request<GetMyKubeconfigRequest>,
    ) -> Result<GetMyKubeconfigResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let ca_file = request.get_ref().ca_file.as_str();
        validate::ca_file(ca_file)?;
        self.require(&caller, &[access::kubeconfig()]).await?;
        let cluster = self.inner.config.cluster.as_ref().ok_or_else(|| {
            ApiError::FailedPrecondition("no cluster is configured for kubeconfigs on this issuer".to_owned())
        })?;
        let settings = self.inner.config.settings.get();
        let endpoint = match &self.inner.config.talos_endpoint {
            Some(followed) => followed.get(),
            None => Arc::new(Ok(cluster.endpoint.clone())),
        };
        // Several TalosClusters and none chosen: the fallback would be the issuer's in-cluster
        // address, which no user's machine reaches, so the caller is told what to set instead.
        let server = choose_server(
            settings.kube_api_server_url.as_deref(),
            &endpoint,
            &cluster.endpoint,
        )
        .map_err(|why| ApiError::FailedPrecondition(format!("no kubeconfig can be made: {why}")))?;
        if let ServerSource::Fallback(why) = &server.source {
            tracing::warn!(
                server = %server.server,
                %why,
                "GetMyKubeconfig: the cluster's spec.endpoint is unknown; the kubeconfig names the \
                 issuer's own API server address (set kubeAPIServerURL to choose another)"
            );
        }
        let input = KubeconfigInput {
            cluster_name: &cluster.name,
            user: &caller.name,
            server: server.server,
            tls_server_name: settings.kube_api_tls_server_name.as_deref(),
            ca_pem: &cluster.ca_pem,
            issuer_url: &self.inner.config.issuer_url,
            ca_file: (!ca_file.is_empty()).then_some(ca_file),
        };
        // An external caller's kubectl signs in at its own provider, with the client the
        // kube-apiserver trusts for it.
        let rendered = match (&caller.external, &self.inner.config.external) {
            (Some(_), Some(external)) => {
                let provider = external.provider();
                kubeconfig::render_for(
                    &input,
                    &kubeconfig::Login {
                        issuer_url: &provider.issuer,
                        client_id: &provider.kube_client_id,
                        audience: &provider.kube_client_id,
                        scope_prompt: Some((kubeconfig::EXTERNAL_SCOPE, kubeconfig::EXTERNAL_PROMPT)),
                    },
                )
            }
            _ => kubeconfig::render(&input),
        };
        let kubeconfig = rendered.map_err(|e| ApiError::FailedPrecondition(e.to_string()))?;
        Ok(GetMyKubeconfigResponse { kubeconfig })
    }

    pub(super) async fn who_am_i_impl(
        &self,
        request: Request<WhoAmIRequest>,
    ) -> Result<WhoAmIResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::AllowMustChange).await?;
        Ok(WhoAmIResponse {
            name: caller.name,
            display_name: caller.display_name.unwrap_or_default(),
            email: caller.email.unwrap_or_default(),
            roles: caller.roles,
            must_change: caller.must_change,
            second_factor: caller.second_factor.name().to_owned(),
            must_enrol: caller.must_enrol,
        })
    }
}
