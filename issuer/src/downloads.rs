//! `/downloads`: how to install the `ichor` CLI, the page every kubeconfig's `installHint`
//! names (`<issuer>/downloads`, [`crate::api::kubeconfig`]).
//!
//! The page says how to get the CLI; it does not serve the binaries. The issuer image carries
//! only `ichor-issuer` (Dockerfile, stage `ichor-issuer`); the CLI is two files, `ichor` (the
//! exec plugin) and `ichor-full` beside it, in the image `ghcr.io/maesh/ichor`
//! (`/usr/local/bin`), which is distroless: no shell, no `cat`, so they are copied out of a
//! created container with `docker cp`. Anywhere else they are built from the sources with
//! `cargo install`. The version named is this binary's, which is the chart's `appVersion` the
//! images are tagged with.
//!
//! The page is static HTML built once at start (the issuer URL escaped into it), with no script
//! and no style: its CSP ([`DOWNLOADS_CSP`]) allows nothing to load, and it carries the other
//! headers of the issuer's pages ([`crate::ui::security_headers`]).

use axum::{
    Router,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};

/// The path served.
pub const PATH: &str = "/downloads";

/// The image holding the CLI (`ichor` and `ichor-full` in [`IMAGE_BIN_DIR`]).
pub const CLI_IMAGE: &str = "ghcr.io/maesh/ichor";

/// Where the CLI image keeps the two programs.
pub const IMAGE_BIN_DIR: &str = "/usr/local/bin";

/// The Content-Security-Policy of the page: nothing but the document itself (no script, style,
/// image, frame or form target).
pub const DOWNLOADS_CSP: &str =
    "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The version of this build, the tag of the matching CLI image.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The route of [`PATH`] for the issuer at `issuer_url` (used in the example command).
pub fn router(issuer_url: &str) -> Router {
    let page = page(issuer_url);
    Router::new().route(PATH, get(move || std::future::ready(respond(page.clone()))))
}

fn respond(page: String) -> Response {
    let mut response = (StatusCode::OK, page).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    crate::ui::security_headers(h);
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DOWNLOADS_CSP),
    );
    response
}

/// The page's HTML for the issuer at `issuer_url`.
pub fn page(issuer_url: &str) -> String {
    let issuer = crate::oidc::page::escape(issuer_url.trim_end_matches('/'));
    let image = format!("{CLI_IMAGE}:{VERSION}");
    let bin = IMAGE_BIN_DIR;
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Install the ichor CLI</title>
</head>
<body>
<h1>Install the ichor CLI</h1>
<p>The kubeconfigs of this Ichor sign you in with <code>ichor auth token</code>, which kubectl runs
as an exec plugin. The CLI is two programs that must stay side by side in one directory on your
<code>PATH</code>: <code>ichor</code> (the plugin, started by every kubectl call) and
<code>ichor-full</code> (every other command). This issuer is version {VERSION}; install the same
version.</p>

<h2>Linux: copy it out of the image</h2>
<p>The image <code>{image}</code> holds both programs in <code>{bin}</code>. It has no shell (it
is distroless), so copy them out of a container that is created, never started:</p>
<pre><code>docker create --name ichor-cli {image}
mkdir -p ~/.local/bin
docker cp ichor-cli:{bin}/ichor ~/.local/bin/ichor
docker cp ichor-cli:{bin}/ichor-full ~/.local/bin/ichor-full
docker rm ichor-cli</code></pre>
<p>Podman takes the same commands. <code>ichor-full</code> is linked against glibc (Debian 12 or
newer); on a musl system such as Alpine, build from the sources.</p>

<h2>Any system: build from the sources</h2>
<p>With Rust {RUST} or newer, in a checkout of the Ichor sources at version {VERSION}:</p>
<pre><code>cargo install --locked --path cli --bin ichor --bin ichor-full</code></pre>
<p>cargo puts both programs in <code>~/.cargo/bin</code>.</p>

<h2>Then</h2>
<p>Sign in and write your kubeconfig:</p>
<pre><code>ichor auth kubeconfig --issuer {issuer} --out ~/.kube/ichor.yaml
KUBECONFIG=~/.kube/ichor.yaml kubectl get nodes</code></pre>
</body>
</html>
"#,
        RUST = env!("CARGO_PKG_RUST_VERSION"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn the_page_says_how_to_install_the_cli_with_the_issuers_headers_and_no_script() {
        let response = router("https://ichor.example.com/")
            .oneshot(Request::get(PATH).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let h = response.headers().clone();
        assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], DOWNLOADS_CSP);
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let html = String::from_utf8(body.to_vec()).unwrap();
        let image = format!("ghcr.io/maesh/ichor:{VERSION}");
        for needle in [
            format!("docker create --name ichor-cli {image}"),
            "docker cp ichor-cli:/usr/local/bin/ichor ~/.local/bin/ichor\n".to_owned(),
            "docker cp ichor-cli:/usr/local/bin/ichor-full ~/.local/bin/ichor-full".to_owned(),
            "cargo install --locked --path cli --bin ichor --bin ichor-full".to_owned(),
            "ichor auth kubeconfig --issuer https://ichor.example.com --out".to_owned(),
        ] {
            assert!(html.contains(&needle), "{needle}\n{html}");
        }
        for forbidden in [
            "<script", "<style", "style=", "<img", "<form", "<iframe", "{", "}",
        ] {
            assert!(!html.contains(forbidden), "{forbidden}");
        }
    }

    #[test]
    fn the_issuer_url_is_escaped_into_the_page() {
        let html = page("https://ichor.example.com/<b>\"x\"&'y'");
        assert!(
            html.contains("https://ichor.example.com/&lt;b&gt;&quot;x&quot;&amp;&#39;y&#39;"),
            "{html}"
        );
        assert!(!html.contains("<b>"), "{html}");
    }

    #[test]
    fn the_image_path_is_the_one_the_dockerfile_copies_the_cli_to() {
        let dockerfile = include_str!("../../Dockerfile");
        let stage = dockerfile
            .split("AS ichor\n")
            .nth(1)
            .expect("the Dockerfile has an `ichor` stage");
        assert!(
            stage.contains(&format!(
                "COPY --from=build /out/ichor /out/ichor-full {IMAGE_BIN_DIR}/"
            )),
            "{stage}"
        );
        let issuer_stage = dockerfile
            .split("AS ichor-issuer\n")
            .nth(1)
            .and_then(|s| s.split("FROM ").next())
            .unwrap();
        let copies: Vec<&str> = issuer_stage.lines().filter(|l| l.starts_with("COPY")).collect();
        assert_eq!(
            copies,
            ["COPY --from=build /out/ichor-issuer /usr/local/bin/ichor-issuer"],
            "the issuer image carries no CLI, so the page says where to get it instead of serving it"
        );
    }
}
