//! `ichor auth kubeconfig`: the caller's kubeconfig from `GetMyKubeconfig` (it holds no secret;
//! its user runs `ichor auth token`), printed or written to `--out`.
//!
//! # Guarantees
//! - Signs in for audience `ichor-ui` when needed: the cached login, its refresh token, or (on a
//!   terminal) the browser login.
//! - `--ca-file` is sent as an absolute path, so the exec plugin finds it from any directory.
//! - Nothing is written or printed unless the kubeconfig has the shape Ichor renders: its only
//!   user runs `ichor auth token` at this issuer and nothing else ([`check_kubeconfig`]).
//! - `--out` is written atomically with mode 0600; an existing file with other content is left
//!   alone unless `--force` is given.

use std::{
    io::{IsTerminal, Write},
    path::Path,
    process::ExitCode,
};

use anyhow::Context as _;
use ichor_server::atomic_file::write_atomic;

use super::{cache::CacheDir, flow, issuer_url::IssuerUrl, kubeconfig_check::check_kubeconfig};
use crate::api_client::UserApiClient;

/// What happened to `--out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The file did not exist and was created.
    Created,
    /// The file held the same kubeconfig; nothing was written.
    Unchanged,
    /// The file held something else and `--force` replaced it.
    Replaced,
}

/// Writes `text` to `path` (0600, atomic), refusing to replace other content without `force`.
///
/// # Errors
/// A refusal naming `--force`, or the I/O error naming the file.
pub fn write_kubeconfig(path: &Path, text: &str, force: bool) -> anyhow::Result<Written> {
    let existing = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("--out {}: cannot read it", path.display())),
    };
    let outcome = match existing {
        Some(bytes) if bytes == text.as_bytes() => return Ok(Written::Unchanged),
        Some(_) if !force => anyhow::bail!(
            "--out {}: the file exists with other content; pass --force to replace it",
            path.display()
        ),
        Some(_) => Written::Replaced,
        None => Written::Created,
    };
    write_atomic(path, text.as_bytes())
        .with_context(|| format!("--out {}: cannot write it", path.display()))?;
    Ok(outcome)
}

/// The issuer to use: `--issuer`, else the one issuer with a cached login.
fn pick_issuer(issuer: Option<&str>) -> anyhow::Result<IssuerUrl> {
    if let Some(raw) = issuer {
        return Ok(IssuerUrl::parse(raw)?);
    }
    let dir = CacheDir::from_env()?;
    let mut issuers: Vec<String> = dir
        .list()?
        .into_iter()
        .filter_map(|l| l.entry.ok())
        .map(|e| e.issuer)
        .collect();
    issuers.sort();
    issuers.dedup();
    match issuers.as_slice() {
        [one] => Ok(IssuerUrl::parse(one)?),
        [] => anyhow::bail!("no cached login names an issuer; pass --issuer <Ichor's external URL>"),
        many => anyhow::bail!(
            "logins for several issuers are cached ({}); pass --issuer",
            many.join(", ")
        ),
    }
}

/// Runs `ichor auth kubeconfig`.
///
/// # Errors
/// Sign-in, API or file errors, as one sentence each.
pub fn run(
    issuer: Option<&str>,
    out: Option<&Path>,
    ca_file: Option<&Path>,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let issuer = pick_issuer(issuer)?;
    let ca_arg = ca_file
        .map(|p| {
            std::path::absolute(p)
                .with_context(|| format!("--ca-file {}: cannot make the path absolute", p.display()))
        })
        .transpose()?;
    let interactive = std::io::stdin().is_terminal();
    let text = flow::runtime()?.block_on(async {
        let mut api = UserApiClient::connect(&issuer, ca_arg.as_deref(), interactive).await?;
        let ca = ca_arg.as_ref().map(|p| p.display().to_string());
        let text = api.get_my_kubeconfig(ca.as_deref()).await?;
        check_kubeconfig(&text, &issuer, ca.as_deref())?;
        anyhow::Ok(text)
    })?;
    match out {
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .context("cannot write to standard output")?;
        }
        Some(path) => {
            let what = match write_kubeconfig(path, &text, force)? {
                Written::Created => "Wrote",
                Written::Replaced => "Replaced",
                Written::Unchanged => "Unchanged:",
            };
            eprintln!(
                "{what} {} (no secret inside: kubectl signs in through `ichor auth token --issuer {issuer}`).\n\
                 Use it with: KUBECONFIG={} kubectl get nodes",
                path.display(),
                path.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_new_file_is_created_with_mode_0600_and_the_same_text_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        assert_eq!(
            write_kubeconfig(&path, "a: 1\n", false).unwrap(),
            Written::Created
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert_eq!(
            write_kubeconfig(&path, "a: 1\n", false).unwrap(),
            Written::Unchanged
        );
    }

    #[test]
    fn other_content_is_replaced_only_with_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, "mine\n").unwrap();
        let e = write_kubeconfig(&path, "a: 1\n", false).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine\n");
        assert_eq!(
            write_kubeconfig(&path, "a: 1\n", true).unwrap(),
            Written::Replaced
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a: 1\n");
    }
}
