//! The confirmation of a destructive `ichor user` command: the user's name typed on the
//! terminal, refused without one (the caller passes `--yes` instead).

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Context as _;

/// How a destructive command asks for confirmation.
pub(super) struct Confirmation {
    /// "delete user": what is refused without confirmation.
    act: &'static str,
    /// The question before the user's name is typed (`{name}` is replaced).
    question: &'static str,
    /// What did not happen when the name typed differs.
    not_done: &'static str,
}

/// `ichor user delete`.
pub(super) const DELETE: Confirmation = Confirmation {
    act: "delete user",
    question: "Delete user {name} and its credentials?",
    not_done: "was not deleted",
};

/// `ichor user reset-factors`.
pub(super) const RESET_FACTORS: Confirmation = Confirmation {
    act: "reset the second factors of user",
    question: "Remove every second factor of user {name} and end its sessions?",
    not_done: "keeps its second factors",
};

/// Asks on the terminal to type the name; refuses without a terminal.
pub(super) fn by_name(name: &str, how: &Confirmation) -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "refusing to {} {name:?} without confirmation: stdin is not a terminal; pass --yes",
            how.act
        );
    }
    let question = how.question.replace("{name}", &format!("{name:?}"));
    eprint!("{question} Type the name to confirm: ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the confirmation")?;
    if line.trim() != name {
        anyhow::bail!("not confirmed; user {name:?} {}", how.not_done);
    }
    Ok(())
}
