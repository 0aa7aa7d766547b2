//! The web UI: the built single-page application (`ui/dist`, made by `npm run build` in `ui/`)
//! and `/auth/config`, which tells the SPA which sign-in providers exist and whether the API
//! requires a token (docs/architecture.md, "Object names and formats").
//!
//! The built UI is committed to the repository and embedded in the binary at compile time
//! (`build.rs` turns `ui/dist` into [`EMBEDDED`]), so the Rust build needs no Node.js and every
//! binary, the container images included, carries the UI of its sources. For UI development,
//! `ICHOR_UI_DIR` ([`UI_DIR_ENV`]) serves a directory on disk instead, read at request time.
//! Every UI response carries the strict CSP (`script-src 'self'`, no inline script), `index.html`
//! is `no-cache` (a new build is picked up at once) and the content-hashed files under `/assets/`
//! are cached for a year.

use std::{ffi::OsString, path::PathBuf};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path as UrlPath, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::Serialize;
use std::sync::Arc;

use crate::external::trust::ExternalTrust;

/// The environment variable naming a directory of the built UI to serve instead of the embedded
/// one (for UI development: rebuild in `ui/` and reload, without rebuilding the binary).
pub const UI_DIR_ENV: &str = "ICHOR_UI_DIR";

/// The UI's OAuth client.
pub use ichor_renderers::contract::UI_CLIENT_ID;

/// The Content-Security-Policy of every UI response: scripts and everything else from this
/// origin only, never framed.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `Cache-Control` of the content-hashed assets.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The paths the SPA routes itself; each answers `index.html`.
pub const SPA_ROUTES: [&str; 4] = ["/", "/auth/callback", "/users", "/account"];

/// The provider id of Ichor's own issuer in `/auth/config`.
pub const ICHOR_PROVIDER_ID: &str = "ichor";
/// The provider id of the site's external OpenID provider in `/auth/config`.
pub const EXTERNAL_PROVIDER_ID: &str = "external";

/// One sign-in provider of `/auth/config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// [`ICHOR_PROVIDER_ID`] or [`EXTERNAL_PROVIDER_ID`].
    pub id: String,
    /// The issuer URL (discovery is at `<issuer>/.well-known/openid-configuration`).
    pub issuer: String,
    /// The OAuth client the SPA uses with this provider.
    pub client_id: String,
}

/// The document of `/auth/config`: the providers, and the older single-provider keys
/// (`enabled`, `issuer`, `clientId`) that readers written before Ichor had its own users
/// still read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthConfig {
    /// The sign-in providers, Ichor's own first.
    pub providers: Vec<Provider>,
    /// Whether the API refuses calls without a bearer token.
    pub api_requires_token: bool,
    /// Older key: sign-in is on (the API requires a token).
    pub enabled: bool,
    /// Older key: the provider an older reader signs in at: the external provider when one is
    /// configured (the one such a reader was set up for), else Ichor's issuer.
    pub issuer: String,
    /// Older key: that provider's client.
    pub client_id: String,
    /// With an external provider and a cluster to compare with: whether its kube-apiserver
    /// trusts the provider as Ichor's API maps it (the UI warns when it differs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_trust: Option<crate::external::trust::TrustCheck>,
}

impl AuthConfig {
    /// The configuration with Ichor's issuer as the only provider.
    pub fn ichor_only(issuer: &str, api_requires_token: bool) -> Self {
        Self::new(issuer, None, api_requires_token)
    }

    /// Ichor's issuer, and `external` (issuer, client id) after it when configured.
    pub fn new(issuer: &str, external: Option<(&str, &str)>, api_requires_token: bool) -> Self {
        let mut providers = vec![Provider {
            id: ICHOR_PROVIDER_ID.to_owned(),
            issuer: issuer.to_owned(),
            client_id: UI_CLIENT_ID.to_owned(),
        }];
        if let Some((issuer, client_id)) = external {
            providers.push(Provider {
                id: EXTERNAL_PROVIDER_ID.to_owned(),
                issuer: issuer.to_owned(),
                client_id: client_id.to_owned(),
            });
        }
        let older = providers.last().cloned().unwrap_or_else(|| Provider {
            id: ICHOR_PROVIDER_ID.to_owned(),
            issuer: issuer.to_owned(),
            client_id: UI_CLIENT_ID.to_owned(),
        });
        AuthConfig {
            providers,
            api_requires_token,
            enabled: api_requires_token,
            issuer: older.issuer,
            client_id: older.client_id,
            external_trust: None,
        }
    }

    /// The origins besides this one the SPA talks to: each external provider's issuer origin
    /// (discovery and the token endpoint), for the CSP's `connect-src`.
    pub fn external_origins(&self) -> Vec<String> {
        self.providers
            .iter()
            .filter(|p| p.id != ICHOR_PROVIDER_ID)
            .filter_map(|p| url::Url::parse(&p.issuer).ok())
            .map(|u| u.origin().ascii_serialization())
            .filter(|o| o != "null")
            .collect()
    }
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/ui_dist.rs"));
}

/// The built UI compiled into this binary: (path relative to `ui/dist`, e.g. `index.html` or
/// `assets/index-DmeABZAz.js`, contents), sorted by path. Empty when `ui/dist` was missing at
/// build time.
pub static EMBEDDED: &[(&str, &[u8])] = embedded::FILES;

/// Where the UI routes take the built UI from.
#[derive(Debug, Clone)]
pub enum UiFiles {
    /// A table like [`EMBEDDED`] (sorted by path); an empty one means no UI.
    Embedded(&'static [(&'static str, &'static [u8])]),
    /// A directory on disk holding `index.html` and `assets/`, read at request time.
    Dir(PathBuf),
}

impl UiFiles {
    /// The directory `value` (of [`UI_DIR_ENV`]) names when set, else [`EMBEDDED`].
    pub fn from_env_value(value: Option<OsString>) -> Self {
        match value {
            Some(dir) => UiFiles::Dir(PathBuf::from(dir)),
            None => UiFiles::Embedded(EMBEDDED),
        }
    }

    /// The directory of `$ICHOR_UI_DIR` when set, else the embedded UI.
    pub fn from_env() -> Self {
        Self::from_env_value(std::env::var_os(UI_DIR_ENV))
    }

    /// The contents of `path` (relative to `ui/dist`, already checked safe).
    async fn read(&self, path: &str) -> Option<Bytes> {
        match self {
            UiFiles::Embedded(table) => table
                .binary_search_by(|(p, _)| (*p).cmp(path))
                .ok()
                .map(|i| Bytes::from_static(table[i].1)),
            UiFiles::Dir(dir) => tokio::fs::read(dir.join(path)).await.ok().map(Bytes::from),
        }
    }
}

/// Whether `name` (the part after `/assets/`) is a safe asset file name: one path segment of
/// ASCII letters, digits, `.`, `-` and `_`, not starting with a dot (so no `..`, no hidden file,
/// no directory escape).
pub fn is_safe_asset_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The `Content-Type` for a file name, by extension; `None` for a type the UI does not serve.
pub fn content_type(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "html" => "text/html; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "json" | "map" => "application/json",
        _ => return None,
    })
}

/// The headers every UI response carries.
pub fn security_headers(h: &mut HeaderMap) {
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

#[derive(Debug, Clone)]
struct UiState {
    files: UiFiles,
    config: AuthConfig,
    csp: HeaderValue,
    trust: Option<Arc<ExternalTrust>>,
}

/// The CSP of a UI with these providers: [`CSP`], with each external provider's origin added to
/// `connect-src` (the SPA reads its discovery document and redeems the code at its token
/// endpoint with `fetch`; scripts still come from this origin only).
pub fn csp_for(config: &AuthConfig) -> HeaderValue {
    let origins = config.external_origins();
    if origins.is_empty() {
        return HeaderValue::from_static(CSP);
    }
    let csp = CSP.replace(
        "connect-src 'self'",
        &format!("connect-src 'self' {}", origins.join(" ")),
    );
    HeaderValue::from_str(&csp).unwrap_or_else(|_| HeaderValue::from_static(CSP))
}

/// The UI routes: [`SPA_ROUTES`] (each `index.html`), `/assets/{file}` and `/auth/config`.
/// `files` is the built UI ([`UiFiles::from_env`] in `ichor dev` and the issuer); without an
/// `index.html` there the pages answer 404 with the command that builds it, and `/auth/config`
/// is still served.
pub fn router(files: UiFiles, config: AuthConfig) -> Router {
    router_with_trust(files, config, None)
}

/// [`router`] whose `/auth/config` also says, from `trust`, whether the cluster trusts the
/// external provider as the API maps it (`externalTrust`).
pub fn router_with_trust(files: UiFiles, config: AuthConfig, trust: Option<Arc<ExternalTrust>>) -> Router {
    let csp = csp_for(&config);
    let state = UiState {
        files,
        config,
        csp,
        trust,
    };
    let mut r = Router::new()
        .route("/auth/config", get(auth_config))
        .route("/assets/{file}", get(asset));
    for route in SPA_ROUTES {
        r = r.route(route, get(index));
    }
    r.with_state(state)
}

async fn auth_config(State(state): State<UiState>) -> Response {
    let mut config = state.config;
    config.external_trust = state.trust.map(|t| (*t.get()).clone());
    let mut response = Json(config).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    security_headers(response.headers_mut());
    response
        .headers_mut()
        .insert(header::CONTENT_SECURITY_POLICY, state.csp);
    response
}

fn plain(status: StatusCode, message: &'static str) -> Response {
    let mut response = (status, message).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    security_headers(response.headers_mut());
    response
}

const NOT_BUILT: &str = "The Ichor web UI is not built into this binary (or not found in ICHOR_UI_DIR). \
                         Run `npm ci && npm run build` in ui/ and rebuild, or point ICHOR_UI_DIR at a \
                         built UI, and reload.";

async fn index(State(state): State<UiState>) -> Response {
    let mut response = match state.files.read("index.html").await {
        Some(body) => file_response(body, "text/html; charset=utf-8", "no-cache"),
        None => plain(StatusCode::NOT_FOUND, NOT_BUILT),
    };
    response
        .headers_mut()
        .insert(header::CONTENT_SECURITY_POLICY, state.csp);
    response
}

async fn asset(State(state): State<UiState>, UrlPath(file): UrlPath<String>) -> Response {
    let Some(kind) = content_type(&file).filter(|_| is_safe_asset_name(&file)) else {
        return plain(StatusCode::NOT_FOUND, "No such file.");
    };
    match state.files.read(&format!("assets/{file}")).await {
        Some(body) => file_response(body, kind, IMMUTABLE),
        None => plain(StatusCode::NOT_FOUND, "No such file."),
    }
}

fn file_response(body: Bytes, kind: &'static str, cache: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    security_headers(h);
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    fn built() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("assets")).unwrap();
        std::fs::write(tmp.path().join("index.html"), "<!doctype html><p>ui</p>").unwrap();
        std::fs::write(tmp.path().join("assets/index-abc123.js"), "console.log(1)").unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "no").unwrap();
        tmp
    }

    async fn get(router: Router, uri: &str) -> (StatusCode, HeaderMap, String) {
        let response = router
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    fn config() -> AuthConfig {
        AuthConfig::ichor_only("https://127.0.0.1:8443", true)
    }

    #[tokio::test]
    async fn every_spa_route_answers_index_html_uncached_with_the_strict_csp() {
        let tmp = built();
        for route in SPA_ROUTES {
            let (status, h, body) = get(router(UiFiles::Dir(tmp.path().to_owned()), config()), route).await;
            assert_eq!(status, StatusCode::OK, "{route}");
            assert_eq!(body, "<!doctype html><p>ui</p>");
            assert_eq!(h[header::CACHE_CONTROL], "no-cache");
            assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
            let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
        }
    }

    #[tokio::test]
    async fn hashed_assets_are_cached_for_a_year() {
        let tmp = built();
        let (status, h, body) = get(
            router(UiFiles::Dir(tmp.path().to_owned()), config()),
            "/assets/index-abc123.js",
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "console.log(1)");
        assert_eq!(h[header::CACHE_CONTROL], IMMUTABLE);
        assert_eq!(h[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
    }

    #[tokio::test]
    async fn refuses_paths_that_leave_the_assets_directory() {
        let tmp = built();
        for uri in [
            "/assets/..%2Fsecret.txt",
            "/assets/.hidden.js",
            "/assets/%2E%2E",
            "/assets/x.exe",
        ] {
            let (status, _, body) = get(router(UiFiles::Dir(tmp.path().to_owned()), config()), uri).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
            assert_ne!(body, "no", "{uri}");
        }
        assert!(!is_safe_asset_name("../secret.txt"));
        assert!(!is_safe_asset_name("a/b.js"));
        assert!(is_safe_asset_name("index-Ab_1.css"));
    }

    #[tokio::test]
    async fn without_a_build_the_pages_say_how_to_build_it_and_the_config_is_still_served() {
        let (status, _, body) = get(router(UiFiles::Embedded(&[]), config()), "/").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("npm ci && npm run build"));
        let (status, h, body) = get(router(UiFiles::Embedded(&[]), config()), "/auth/config").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({
                "providers": [{"id": "ichor", "issuer": "https://127.0.0.1:8443", "clientId": "ichor-ui"}],
                "apiRequiresToken": true,
                "enabled": true,
                "issuer": "https://127.0.0.1:8443",
                "clientId": "ichor-ui"
            })
        );
    }

    /// What a reader written before Ichor had its own users takes from `/auth/config`: the
    /// single-provider keys only, unknown keys ignored (serde's default, as such a reader has).
    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct OlderReader {
        enabled: bool,
        issuer: String,
        client_id: String,
    }

    #[tokio::test]
    async fn with_an_external_provider_both_shapes_are_served_and_an_older_reader_still_finds_its_provider() {
        let both = AuthConfig::new(
            "https://ichor.example.com",
            Some(("https://idp.example.com/realms/corp", "ichor")),
            true,
        );
        let (status, _, body) = get(router(UiFiles::Embedded(&[]), both), "/auth/config").await;
        assert_eq!(status, StatusCode::OK);
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            doc["providers"],
            serde_json::json!([
                {"id": "ichor", "issuer": "https://ichor.example.com", "clientId": "ichor-ui"},
                {"id": "external", "issuer": "https://idp.example.com/realms/corp", "clientId": "ichor"}
            ])
        );
        assert_eq!(doc["apiRequiresToken"], true);
        // The older reader: sign-in enabled, at the external provider it was set up for.
        let older: OlderReader = serde_json::from_str(&body).unwrap();
        assert_eq!(
            older,
            OlderReader {
                enabled: true,
                issuer: "https://idp.example.com/realms/corp".into(),
                client_id: "ichor".into(),
            }
        );
        // The pages may fetch from the provider's origin, and from nowhere else.
        let tmp = built();
        let both = AuthConfig::new(
            "https://ichor.example.com",
            Some(("https://idp.example.com:8443/realms/corp", "ichor")),
            true,
        );
        let (_, h, _) = get(router(UiFiles::Dir(tmp.path().to_owned()), both), "/").await;
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(
            csp.contains("connect-src 'self' https://idp.example.com:8443;"),
            "{csp}"
        );
        assert!(csp.contains("script-src 'self';"), "{csp}");
        // Without one, the older keys name Ichor's issuer and its UI client.
        let (_, _, body) = get(router(UiFiles::Embedded(&[]), config()), "/auth/config").await;
        let older: OlderReader = serde_json::from_str(&body).unwrap();
        assert_eq!(
            older,
            OlderReader {
                enabled: true,
                issuer: "https://127.0.0.1:8443".into(),
                client_id: "ichor-ui".into(),
            }
        );
    }

    #[tokio::test]
    async fn the_config_says_whether_the_cluster_trusts_the_provider_as_the_api_maps_it() {
        use crate::external::{ExternalProvider, trust::ClusterEntries};
        use ichor_renderers::crd::ExternalIssuerSpec;
        let provider = ExternalProvider::example();
        let trust = Arc::new(ExternalTrust::new(provider, "prod"));
        let with_idp = AuthConfig::new(
            "https://ichor.example.com",
            Some(("https://idp.example.com", "ichor-ui")),
            true,
        );
        let app = router_with_trust(UiFiles::Embedded(&[]), with_idp, Some(Arc::clone(&trust)));
        let doc = |body: String| serde_json::from_str::<serde_json::Value>(&body).unwrap();
        let (_, _, body) = get(app.clone(), "/auth/config").await;
        assert_eq!(doc(body)["externalTrust"]["status"], "unknown");
        let entry = ExternalIssuerSpec {
            issuer_url: "https://idp.example.com".into(),
            audiences: vec!["kubernetes".into()],
            username_prefix: Some("corp:".into()),
            ..ExternalIssuerSpec::default()
        };
        let mut clusters: ClusterEntries = [("prod".to_owned(), vec![entry.clone()])].into();
        trust.apply(&clusters);
        let (_, _, body) = get(app.clone(), "/auth/config").await;
        let d = doc(body);
        assert_eq!(d["externalTrust"]["status"], "differs");
        assert!(
            d["externalTrust"]["reason"]
                .as_str()
                .unwrap()
                .contains("username prefix")
        );
        clusters.insert(
            "prod".to_owned(),
            vec![ExternalIssuerSpec {
                username_prefix: None,
                ..entry
            }],
        );
        trust.apply(&clusters);
        let (_, _, body) = get(app, "/auth/config").await;
        assert_eq!(doc(body)["externalTrust"]["status"], "matches");
        // Without a provider or a cluster to compare with, the key is absent.
        let (_, _, body) = get(router(UiFiles::Embedded(&[]), config()), "/auth/config").await;
        assert!(doc(body).get("externalTrust").is_none());
    }

    /// A table like the one `build.rs` generates, sorted by path.
    const TABLE: &[(&str, &[u8])] = &[
        ("assets/index-abc123.css", b"p{}"),
        ("assets/index-abc123.js", b"console.log(2)"),
        ("index.html", b"<!doctype html><p>embedded</p>"),
        ("secret.txt", b"no"),
    ];

    #[tokio::test]
    async fn an_embedded_table_serves_index_html_and_hashed_assets_with_their_headers() {
        for route in SPA_ROUTES {
            let (status, h, body) = get(router(UiFiles::Embedded(TABLE), config()), route).await;
            assert_eq!(status, StatusCode::OK, "{route}");
            assert_eq!(body, "<!doctype html><p>embedded</p>");
            assert_eq!(h[header::CACHE_CONTROL], "no-cache");
            assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
        for (uri, body, kind) in [
            (
                "/assets/index-abc123.js",
                "console.log(2)",
                "text/javascript; charset=utf-8",
            ),
            ("/assets/index-abc123.css", "p{}", "text/css; charset=utf-8"),
        ] {
            let (status, h, got) = get(router(UiFiles::Embedded(TABLE), config()), uri).await;
            assert_eq!(status, StatusCode::OK, "{uri}");
            assert_eq!(got, body);
            assert_eq!(h[header::CACHE_CONTROL], IMMUTABLE);
            assert_eq!(h[header::CONTENT_TYPE], kind);
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
        }
        for uri in [
            "/assets/index-zzz.js",
            "/assets/..%2Fsecret.txt",
            "/assets/..%2Findex.html",
        ] {
            let (status, _, body) = get(router(UiFiles::Embedded(TABLE), config()), uri).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
            assert_eq!(body, "No such file.", "{uri}");
        }
    }

    #[tokio::test]
    async fn the_committed_build_is_embedded_and_every_asset_its_index_loads_is_served() {
        assert!(
            EMBEDDED.iter().any(|(p, _)| *p == "index.html"),
            "no index.html embedded: build.rs found no ui/dist (it is committed; see ui/)"
        );
        assert!(
            EMBEDDED.windows(2).all(|w| w[0].0 < w[1].0),
            "the table is not sorted"
        );
        let (status, h, index) = get(router(UiFiles::from_env_value(None), config()), "/account").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        let assets: Vec<&str> = index
            .split("\"/assets/")
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(name, _)| name))
            .collect();
        assert!(!assets.is_empty(), "index.html loads no asset: {index}");
        for name in assets {
            let (status, h, body) = get(
                router(UiFiles::Embedded(EMBEDDED), config()),
                &format!("/assets/{name}"),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{name}");
            assert_eq!(h[header::CACHE_CONTROL], IMMUTABLE, "{name}");
            assert_eq!(h[header::CONTENT_TYPE], content_type(name).unwrap(), "{name}");
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP);
            let embedded = EMBEDDED
                .iter()
                .find(|(p, _)| *p == format!("assets/{name}"))
                .unwrap()
                .1;
            assert_eq!(body.as_bytes(), embedded, "{name}");
        }
    }

    #[tokio::test]
    async fn the_ui_dir_override_is_served_instead_of_the_embedded_build() {
        let tmp = built();
        let files = UiFiles::from_env_value(Some(tmp.path().as_os_str().to_owned()));
        assert!(matches!(&files, UiFiles::Dir(dir) if dir == tmp.path()));
        let (status, h, body) = get(router(files.clone(), config()), "/users").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "<!doctype html><p>ui</p>");
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        let (status, _, body) = get(router(files, config()), "/assets/index-abc123.js").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "console.log(1)");
        // A directory without a build answers the explanation, not the embedded UI.
        let empty = tempfile::tempdir().unwrap();
        let (status, _, body) = get(router(UiFiles::Dir(empty.path().to_owned()), config()), "/").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("ICHOR_UI_DIR"));
    }
}
