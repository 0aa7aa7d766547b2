//! The checks of `ichor init`'s own arguments, made before anything is read or written.

use crate::commands::auth::issuer_url::check_url;

use super::InitError;

/// The longest `--cluster`: the chart's schema takes `controller.rollout.clusters` entries of up
/// to 240 characters, so that `<cluster>-talosconfig` (12 more) is still a Kubernetes name.
pub const MAX_CLUSTER_NAME: usize = 240;

/// Checks `--cluster`: a Kubernetes object name of at most [`MAX_CLUSTER_NAME`] characters. Pure.
///
/// # Errors
/// [`InitError::ClusterName`], [`InitError::ClusterNameTooLong`].
pub fn check_cluster_name(name: &str) -> Result<(), InitError> {
    if !ichor_renderers::crd::is_object_name(name) {
        return Err(InitError::ClusterName(name.to_owned()));
    }
    if name.len() > MAX_CLUSTER_NAME {
        return Err(InitError::ClusterNameTooLong(name.len()));
    }
    Ok(())
}

/// Checks `--ui-url`: an absolute https URL with a host, without query, fragment or user info,
/// written in its normal form (as the URL standard serialises it, without a trailing `/`), so
/// that the string handed to helm and the chart is exactly the URL every token will name. Pure.
///
/// # Errors
/// [`InitError::UiUrl`].
pub fn check_ui_url(raw: &str) -> Result<String, InitError> {
    let trimmed = raw.trim_end_matches('/');
    let bad = |reason: &str| InitError::UiUrl(raw.to_owned(), reason.to_owned());
    let url = check_url("--ui-url", trimmed).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "https" {
        return Err(bad("the kube-apiserver accepts only an https issuer"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("an issuer URL has no query or fragment"));
    }
    let normal = url.as_str().trim_end_matches('/');
    if normal != trimmed {
        return Err(bad(&format!(
            "write it in its normal form, {normal:?} (lower-case host, no default port, no spaces, \
             backslashes or characters that need percent-encoding)"
        )));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_cluster_name_over_240_characters_is_refused_naming_the_flag_and_the_limit() {
        let longest = format!("p{}", "r".repeat(MAX_CLUSTER_NAME - 1));
        assert!(check_cluster_name(&longest).is_ok());
        let e = check_cluster_name(&format!("{longest}d")).unwrap_err();
        assert!(matches!(e, InitError::ClusterNameTooLong(241)), "{e}");
        let e = e.to_string();
        assert!(e.starts_with("--cluster "), "{e}");
        assert!(e.contains("at most 240"), "{e}");
        assert!(
            check_cluster_name(&"a".repeat(253)).is_err(),
            "a valid object name, but too long for the chart"
        );
        assert!(matches!(
            check_cluster_name("Prod"),
            Err(InitError::ClusterName(_))
        ));
    }

    #[test]
    fn the_ui_url_must_be_https_even_on_the_loopback() {
        assert!(check_ui_url("http://127.0.0.1:8443").is_err());
        assert!(check_ui_url("http://ichor.example.com").is_err());
        assert_eq!(
            check_ui_url("https://ichor.example.com/").unwrap(),
            "https://ichor.example.com"
        );
        assert!(check_ui_url("https://ichor.example.com/?x=1").is_err());
        for odd in [
            "https://ICHOR.example.com",
            "https://ichor.example.com:443",
            "https://ichor.example.com\\x",
            "https://ichor.example.com/a b",
            " https://ichor.example.com",
            "https://user@ichor.example.com",
            "https://ichor.example.com#x",
        ] {
            assert!(check_ui_url(odd).is_err(), "{odd:?}");
        }
    }
}
