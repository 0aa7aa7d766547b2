//! The `ichor` executable: it answers `ichor auth token` from a fresh cached login itself and
//! hands every other command line to the full tool, [`FULL_TOOL`], installed beside it.
//!
//! kubectl runs `ichor auth token` before every command, so its start-up is on every user's
//! path. Process start-up here is dominated by mapping and relocating the image: the full tool
//! carries the issuer, kube, tonic and OpenSSL for `ichor dev` and the other commands, and
//! starting it costs about ten times a minimal process. This executable links only the cache
//! read and the reply, and the linker leaves the rest out.
//!
//! # Guarantees
//! - Output, exit codes and the cache are those of the full tool: the fast path is the same
//!   code ([`token::run_cached`]), and every command line it does not fully understand, every
//!   invalid argument and every login that is not fresh goes to the full tool unchanged.
//! - The hand-over is `exec` (same process id, standard streams, environment and `argv[0]`), so
//!   signals, exit codes and usage messages are the full tool's own.
//! - The full tool is looked up only beside this executable (`/proc/self/exe`), never on `PATH`.

use std::{
    ffi::OsString,
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Command, ExitCode},
};

use crate::commands::auth::{PROMPTS, TargetArgs, flow, token};

/// The full tool's file name, in the directory of the `ichor` executable.
pub const FULL_TOOL: &str = "ichor-full";

/// Runs `ichor`: the cached `auth token` here, anything else in the full tool.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(target) = cached_token_args(args.get(1..).unwrap_or_default()).and_then(|a| a.target().ok())
        && let Some(result) = token::run_cached(&target)
    {
        return match result {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {:#}", anyhow::Error::from(e));
                ExitCode::FAILURE
            }
        };
    }
    hand_over(&args)
}

/// Replaces this process with the full tool, given the same arguments and `argv[0]`.
fn hand_over(args: &[OsString]) -> ExitCode {
    let tool = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name(FULL_TOOL),
        Err(e) => {
            eprintln!("error: cannot find this executable's directory, where {FULL_TOOL} is: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut cmd = Command::new(&tool);
    if let Some(argv0) = args.first() {
        cmd.arg0(argv0);
    }
    let e = cmd.args(args.iter().skip(1)).exec();
    eprintln!("{}", missing_tool_message(&tool, &e));
    ExitCode::FAILURE
}

fn missing_tool_message(tool: &std::path::Path, e: &std::io::Error) -> String {
    format!(
        "error: cannot run {}: {e}; `ichor` runs it for every command but a cached `ichor auth \
         token`: install {FULL_TOOL} in the same directory as ichor",
        tool.display()
    )
}

/// The arguments of `ichor auth token` when the command line is exactly that: `auth token`
/// followed only by its own options, each at most once, as `--name value` or `--name=value`,
/// with `--issuer` given. Anything else — another command, `--help`, `-o`, an unknown, repeated
/// or non-UTF-8 argument, a separate value starting with `-` — is `None`, for the full tool
/// (and its own parser's messages).
pub fn cached_token_args(args: &[OsString]) -> Option<TargetArgs> {
    let mut args = args.iter().map(|a| a.to_str());
    if args.next()? != Some("auth") || args.next()? != Some("token") {
        return None;
    }
    let mut values: [Option<String>; 6] = Default::default();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg?.strip_prefix("--")?.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (arg?.strip_prefix("--")?, None),
        };
        let slot = OPTIONS.iter().position(|o| *o == name)?;
        let value = match inline {
            Some(v) => v,
            None => args.next()?.filter(|v| !v.starts_with('-'))?,
        };
        if values[slot].replace(value.to_owned()).is_some() {
            return None;
        }
    }
    let [issuer, client_id, audience, ca_file, scope, prompt] = values;
    // What the full tool's parser refuses: a `--prompt` it does not know, an empty path.
    if prompt.as_deref().is_some_and(|p| !PROMPTS.contains(&p)) || ca_file.as_deref() == Some("") {
        return None;
    }
    Some(TargetArgs {
        issuer: issuer?,
        client_id: client_id.unwrap_or_else(|| flow::DEFAULT_CLIENT_ID.to_owned()),
        audience: audience.unwrap_or_else(|| flow::DEFAULT_AUDIENCE.to_owned()),
        ca_file: ca_file.map(PathBuf::from),
        scope: scope.unwrap_or_else(|| flow::DEFAULT_SCOPE.to_owned()),
        prompt,
    })
}

/// The long options of `ichor auth token`, in the order of the slots in [`cached_token_args`].
const OPTIONS: [&str; 6] = ["issuer", "client-id", "audience", "ca-file", "scope", "prompt"];

#[cfg(test)]
mod tests;
