//! `ichor user …`: Ichor's users through ichor-ui's `UserService` at `--issuer`, signed in with
//! the cached `ichor-ui`-audience login ([`crate::api_client`]); and `create --bootstrap`, the
//! first user of an install, written with the caller's own kubeconfig ([`bootstrap`]).
//!
//! Results go to stdout in the global `-o` format; a generated password is printed exactly once
//! (stdout, and in the JSON/YAML result as `generatedPassword`), never stored or logged. `get`
//! adds the user's second factors (kinds, names, dates: the server sends no secret), and
//! `reset-factors` removes them all (an administrator's answer to a lost authenticator).

use std::{
    io::{BufRead, Write},
    path::PathBuf,
    process::ExitCode,
};

use anyhow::Context as _;
use clap::{ArgGroup, Args, Subcommand};
use ichor_issuer::api::proto::{
    CreateUserRequest, RoleList, SetPasswordRequest, UpdateUserRequest, create_user_request::InitialPassword,
    set_password_request::NewPassword,
};
use ichor_issuer::oidc::passwords::generate_password;
use ichor_renderers::auth::Password;
use jiff::Timestamp;

use crate::{
    OutputFormat,
    api_client::UserApiClient,
    commands::auth::{flow, issuer_url::IssuerUrl},
};

pub mod bootstrap;
mod confirm;
pub mod output;
pub mod second_factors;

/// Where the API is.
#[derive(Debug, Args)]
pub struct ApiArgs {
    /// Ichor's external https URL (the issuer and ichor-ui's API); plain http only to the loopback.
    #[arg(long, value_name = "URL", env = "ICHOR_ISSUER")]
    pub issuer: String,
    /// A PEM file of CA certificates trusted for the issuer, on top of the system's roots.
    #[arg(long, value_name = "FILE", env = "ICHOR_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

/// Subcommands of `ichor user`.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// List every user.
    #[command(after_help = "\
Examples:
  ichor user list --issuer https://ichor.example.com
  ichor user list --issuer https://ichor.example.com -o json")]
    List(ListArgs),
    /// Show one user and its second factors ("2FA: totp, recovery codes (8 left)").
    #[command(after_help = "\
Examples:
  ichor user get alice --issuer https://ichor.example.com
  ichor user get alice --issuer https://ichor.example.com -o yaml")]
    Get(NameArgs),
    /// Create a user, optionally with a first password (changed at first sign-in).
    #[command(
        group(ArgGroup::new("password").args(["generate", "password_stdin"])),
        after_help = "\
A generated password is printed once and stored nowhere; hand it to the user, who must change it
at the first sign-in. Without --generate or --password-stdin the user cannot sign in until an
administrator runs `ichor user set-password`.

--bootstrap creates the FIRST user of an install that has none yet: it writes the IchorUser and
its credentials entry with your own kubeconfig (no sign-in to Ichor), and refuses an existing user
or an install without users (no namespace ichor-credentials: run `ichor init` first).

Examples:
  ichor user create alice --role operator --generate --issuer https://ichor.example.com
  ichor user create bob --role viewer --display-name 'Bob B.' --email bob@example.com --issuer https://ichor.example.com
  printf '%s' \"$PASSWORD\" | ichor user create carol --role viewer --password-stdin --issuer https://ichor.example.com
  ichor user create admin --role admin --generate --bootstrap"
    )]
    Create(CreateArgs),
    /// Change a user's roles, display name, e-mail or disabled flag.
    #[command(
        group(ArgGroup::new("state").args(["disable", "enable"])),
        after_help = "\
Only what is given changes. A disabled user cannot sign in or refresh; existing ID tokens end
within their lifetime (5 minutes).

Examples:
  ichor user update alice --add-role admin --issuer https://ichor.example.com
  ichor user update alice --remove-role operator --add-role viewer --issuer https://ichor.example.com
  ichor user update bob --disable --issuer https://ichor.example.com
  ichor user update bob --display-name '' --issuer https://ichor.example.com"
    )]
    Update(UpdateArgs),
    /// Delete a user and its credentials.
    #[command(after_help = "\
Asks for confirmation (type the user's name) unless --yes is given; without a terminal --yes is
required.

Examples:
  ichor user delete bob --issuer https://ichor.example.com
  ichor user delete bob --yes --issuer https://ichor.example.com")]
    Delete(DeleteArgs),
    /// Set a user's password (the user must change it at the next sign-in); ends every session.
    #[command(
        group(ArgGroup::new("password").args(["generate", "password_stdin"]).required(true)),
        after_help = "\
Examples:
  ichor user set-password alice --generate --issuer https://ichor.example.com
  printf '%s' \"$PASSWORD\" | ichor user set-password alice --password-stdin --issuer https://ichor.example.com"
    )]
    SetPassword(SetPasswordArgs),
    /// Remove every second factor of a user (passkeys, authenticator app, recovery codes) and
    /// end its sessions; the next sign-in asks for the password alone.
    #[command(
        group(ArgGroup::new("password").args(["generate", "password_stdin"])),
        after_help = "\
For a user who lost their authenticator and their recovery codes. The password stays unless
--generate or --password-stdin sets a new one in the same write (the user must change it at the
next sign-in). Asks for confirmation (type the user's name) unless --yes is given; without a
terminal --yes is required. The issuer logs who reset whose factors.

Examples:
  ichor user get alice --issuer https://ichor.example.com
  ichor user reset-factors alice --issuer https://ichor.example.com
  ichor user reset-factors alice --yes --generate --issuer https://ichor.example.com"
    )]
    ResetFactors(ResetFactorsArgs),
    /// End every session of a user (refresh tokens stop working at once).
    #[command(after_help = "\
ID tokens already issued stay valid until they expire (5 minutes).

Examples:
  ichor user revoke-sessions alice --issuer https://ichor.example.com")]
    RevokeSessions(NameArgs),
}

/// Arguments of `ichor user list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of commands about one user.
#[derive(Debug, Args)]
pub struct NameArgs {
    /// The user's name.
    pub name: String,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `ichor user create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The user's name: a lower-case DNS label (the identity `ichor:<name>`).
    pub name: String,
    /// A role (repeat for several): admin, operator, viewer, or a site role.
    #[arg(long = "role", value_name = "ROLE")]
    pub roles: Vec<String>,
    /// The name shown in the UI.
    #[arg(long, value_name = "TEXT")]
    pub display_name: Option<String>,
    /// The user's e-mail (informational).
    #[arg(long, value_name = "ADDRESS")]
    pub email: Option<String>,
    /// Generate a first password and print it once.
    #[arg(long)]
    pub generate: bool,
    /// Read the first password from stdin (one line).
    #[arg(long)]
    pub password_stdin: bool,
    /// Create the first user with your own kubeconfig instead of the API (see below).
    #[arg(long)]
    pub bootstrap: bool,
    /// Ichor's external URL (not used with --bootstrap).
    #[arg(
        long,
        value_name = "URL",
        env = "ICHOR_ISSUER",
        required_unless_present = "bootstrap"
    )]
    pub issuer: Option<String>,
    /// A PEM file of CA certificates trusted for the issuer, on top of the system's roots.
    #[arg(long, value_name = "FILE", env = "ICHOR_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

/// Arguments of `ichor user update`.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The user's name.
    pub name: String,
    /// Add a role (repeatable).
    #[arg(long = "add-role", value_name = "ROLE")]
    pub add_roles: Vec<String>,
    /// Remove a role (repeatable).
    #[arg(long = "remove-role", value_name = "ROLE")]
    pub remove_roles: Vec<String>,
    /// Disable the user (no sign-in, no refresh).
    #[arg(long)]
    pub disable: bool,
    /// Enable the user again.
    #[arg(long)]
    pub enable: bool,
    /// A new display name (empty clears it).
    #[arg(long, value_name = "TEXT")]
    pub display_name: Option<String>,
    /// A new e-mail (empty clears it).
    #[arg(long, value_name = "ADDRESS")]
    pub email: Option<String>,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `ichor user delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The user's name.
    pub name: String,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `ichor user set-password`.
#[derive(Debug, Args)]
pub struct SetPasswordArgs {
    /// The user's name.
    pub name: String,
    /// Generate the password and print it once.
    #[arg(long)]
    pub generate: bool,
    /// Read the password from stdin (one line).
    #[arg(long)]
    pub password_stdin: bool,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Arguments of `ichor user reset-factors`.
#[derive(Debug, Args)]
pub struct ResetFactorsArgs {
    /// The user's name.
    pub name: String,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Also set a generated password, printed once.
    #[arg(long)]
    pub generate: bool,
    /// Also set the password read from stdin (one line).
    #[arg(long)]
    pub password_stdin: bool,
    /// The API.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// The roles after an update: `current` without `remove`, plus `add` not yet present, in order.
/// Pure.
pub fn updated_roles(current: &[String], add: &[String], remove: &[String]) -> Vec<String> {
    let mut roles: Vec<String> = current.iter().filter(|r| !remove.contains(r)).cloned().collect();
    for role in add {
        if !roles.contains(role) {
            roles.push(role.clone());
        }
    }
    roles
}

/// Reads one password line from stdin (the trailing newline removed).
///
/// # Errors
/// When stdin cannot be read or is empty.
pub fn read_password_stdin() -> anyhow::Result<Password> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("--password-stdin: cannot read stdin")?;
    let trimmed = line.strip_suffix('\n').unwrap_or(&line);
    let trimmed = trimmed.strip_suffix('\r').unwrap_or(trimmed);
    if trimmed.is_empty() {
        anyhow::bail!("--password-stdin: stdin held no password");
    }
    Ok(Password::new(trimmed))
}

fn api_parts(issuer: &str) -> anyhow::Result<IssuerUrl> {
    Ok(IssuerUrl::parse(issuer)?)
}

async fn connect(issuer: &str, ca_file: Option<&std::path::Path>) -> anyhow::Result<UserApiClient> {
    let issuer = api_parts(issuer)?;
    Ok(UserApiClient::connect(&issuer, ca_file, false).await?)
}

/// Runs an `ichor user` subcommand.
///
/// # Errors
/// The refusal or failure as one sentence.
pub fn run(cmd: UserCommand, format: OutputFormat) -> anyhow::Result<ExitCode> {
    if let UserCommand::Create(args) = &cmd
        && args.bootstrap
    {
        return run_bootstrap(args, format);
    }
    let runtime = flow::runtime()?;
    runtime.block_on(run_api(cmd, format))
}

async fn run_api(cmd: UserCommand, format: OutputFormat) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match cmd {
        UserCommand::List(args) => {
            let mut api = connect(&args.api.issuer, args.api.ca_file.as_deref()).await?;
            let users = api.list_users().await?;
            output::write_users(&mut out, &users, format)?;
        }
        UserCommand::Get(args) => {
            let mut api = connect(&args.api.issuer, args.api.ca_file.as_deref()).await?;
            let user = api.get_user(&args.name).await?;
            match api.get_user_factors(&args.name).await {
                Ok(factors) => output::write_user_with_factors(&mut out, &user, &factors, format)?,
                // A server without the call, or a role allowed users but not their factors:
                // the user still shows.
                Err(e) => {
                    output::write_user(&mut out, &user, None, format)?;
                    eprintln!(
                        "note: second factors not shown: {}",
                        crate::terminal::escape_controls(&e.to_string())
                    );
                }
            }
        }
        UserCommand::Create(args) => {
            let initial = if args.generate {
                Some(InitialPassword::GeneratePassword(true))
            } else if args.password_stdin {
                Some(InitialPassword::Password(
                    read_password_stdin()?.expose().to_owned(),
                ))
            } else {
                None
            };
            let issuer = args.issuer.as_deref().unwrap_or_default();
            let mut api = connect(issuer, args.ca_file.as_deref()).await?;
            let response = api
                .create_user(CreateUserRequest {
                    name: args.name.clone(),
                    display_name: args.display_name.clone().unwrap_or_default(),
                    email: args.email.clone().unwrap_or_default(),
                    roles: args.roles.clone(),
                    disabled: false,
                    initial_password: initial,
                })
                .await?;
            let generated = (!response.generated_password.is_empty()).then_some(response.generated_password);
            match response.user {
                Some(user) => output::write_user(&mut out, &user, generated.as_deref(), format)?,
                None => anyhow::bail!("CreateUser answered without the user {:?}", args.name),
            }
        }
        UserCommand::Update(args) => {
            let mut api = connect(&args.api.issuer, args.api.ca_file.as_deref()).await?;
            let roles = if args.add_roles.is_empty() && args.remove_roles.is_empty() {
                None
            } else {
                let current = api.get_user(&args.name).await?;
                for role in &args.remove_roles {
                    if !current.roles.contains(role) {
                        eprintln!("note: {} does not have role {role:?}", args.name);
                    }
                }
                Some(RoleList {
                    roles: updated_roles(&current.roles, &args.add_roles, &args.remove_roles),
                })
            };
            let disabled = match (args.disable, args.enable) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            };
            if roles.is_none() && disabled.is_none() && args.display_name.is_none() && args.email.is_none() {
                anyhow::bail!(
                    "nothing to change: give --add-role, --remove-role, --disable, --enable, --display-name or --email"
                );
            }
            let user = api
                .update_user(UpdateUserRequest {
                    name: args.name.clone(),
                    display_name: args.display_name.clone(),
                    email: args.email.clone(),
                    roles,
                    disabled,
                })
                .await?;
            let user = match user {
                Some(user) => user,
                None => api.get_user(&args.name).await?,
            };
            output::write_user(&mut out, &user, None, format)?;
        }
        UserCommand::Delete(args) => {
            if !args.yes {
                confirm::by_name(&args.name, &confirm::DELETE)?;
            }
            let mut api = connect(&args.api.issuer, args.api.ca_file.as_deref()).await?;
            api.delete_user(&args.name).await?;
            eprintln!("Deleted user {:?} and its credentials.", args.name);
        }
        UserCommand::SetPassword(args) => {
            let new_password = if args.generate {
                NewPassword::Generate(true)
            } else {
                NewPassword::Password(read_password_stdin()?.expose().to_owned())
            };
            let mut api = connect(&args.api.issuer, args.api.ca_file.as_deref()).await?;
            let response = api
                .set_password(SetPasswordRequest {
                    name: args.name.clone(),
                    new_password: Some(new_password),
                    reset_factors: false,
                })
                .await?;
            eprintln!(
                "Password of {:?} set; the user must change it at the next sign-in, and every session of the \
                 user has ended.",
                args.name
            );
            if !response.generated_password.is_empty() {
                output::write_password(&mut out, &args.name, &response.generated_password, format)?;
            }
        }
        UserCommand::ResetFactors(args) => {
            let new_password = if args.generate {
                Some(NewPassword::Generate(true))
            } else if args.password_stdin {
                Some(NewPassword::Password(read_password_stdin()?.expose().to_owned()))
            } else {
                None
            };
            if !args.yes {
                confirm::by_name(&args.name, &confirm::RESET_FACTORS)?;
            }
            let mut api = connect(&args.api.issuer, args.api.ca_file.as_deref()).await?;
            let response = api
                .set_password(SetPasswordRequest {
                    name: args.name.clone(),
                    new_password,
                    reset_factors: true,
                })
                .await?;
            eprintln!(
                "Every second factor of {:?} was removed and every session of the user has ended; the next \
                 sign-in asks for the password alone{}.",
                args.name,
                if args.generate || args.password_stdin {
                    " (the new one, to be changed at that sign-in)"
                } else {
                    ""
                }
            );
            if !response.generated_password.is_empty() {
                output::write_password(&mut out, &args.name, &response.generated_password, format)?;
            }
        }
        UserCommand::RevokeSessions(args) => {
            let mut api = connect(&args.api.issuer, args.api.ca_file.as_deref()).await?;
            api.revoke_sessions(&args.name).await?;
            eprintln!(
                "Every session of {:?} has ended; ID tokens already issued expire within their lifetime.",
                args.name
            );
        }
    }
    out.flush().context("cannot write to standard output")?;
    Ok(ExitCode::SUCCESS)
}

fn run_bootstrap(args: &CreateArgs, format: OutputFormat) -> anyhow::Result<ExitCode> {
    let password = if args.password_stdin {
        read_password_stdin()?
    } else if args.generate {
        generate_password()?
    } else {
        anyhow::bail!(
            "--bootstrap needs --generate (or --password-stdin): a first user without a password could not sign in"
        );
    };
    let user = bootstrap::NewUser {
        name: args.name.clone(),
        roles: args.roles.clone(),
        display_name: args.display_name.clone(),
        email: args.email.clone(),
    };
    bootstrap::check_input(&user, &password)?;
    flow::runtime()?.block_on(async {
        let client = kube::Client::try_default()
            .await
            .context("cannot use your kubeconfig (KUBECONFIG or ~/.kube/config) for --bootstrap")?;
        bootstrap::bootstrap_user(client, &user, &password, Timestamp::now()).await?;
        anyhow::Ok(())
    })?;
    eprintln!(
        "Created user {:?} (roles: {}) with your kubeconfig; the password must be changed at the first sign-in.",
        user.name,
        if user.roles.is_empty() {
            "none".to_owned()
        } else {
            user.roles.join(", ")
        }
    );
    if args.generate {
        let mut out = std::io::stdout().lock();
        output::write_password(&mut out, &user.name, password.expose(), format)?;
        out.flush().context("cannot write to standard output")?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn an_update_removes_then_adds_roles_keeping_order_and_no_duplicates() {
        let roles = updated_roles(
            &strings(&["viewer", "operator"]),
            &strings(&["admin", "viewer"]),
            &strings(&["operator"]),
        );
        assert_eq!(roles, strings(&["viewer", "admin"]));
    }

    #[test]
    fn removing_every_role_leaves_an_empty_list() {
        assert!(updated_roles(&strings(&["viewer"]), &[], &strings(&["viewer"])).is_empty());
    }
}
