//! `/validate/ichorusers`: the informational texts (`spec.displayName`, `spec.email`) by the rule
//! the `UserService` API and the CRD's CEL apply (`renderers::auth::text`): bounded, no control
//! characters, no spaces in an e-mail address. `ichor user list` prints them to terminals, so an
//! `ESC` written with `kubectl` must be refused as the API refuses it.
//!
//! As the apiserver ratchets CRD rules, a field an update leaves unchanged is not checked again:
//! an object written before the rule can still be updated (or have its finalizers removed).

use ichor_renderers::auth::text::{TextError, check_display_name, check_email};
use ichor_renderers::crd::IchorUserSpec;

use super::review::Verdict;

/// The denial of a `new` spec (an update's `old` one beside it) whose display name or e-mail is
/// refused, naming the field; `None` when both pass or did not change.
pub fn refused_texts(old: Option<&IchorUserSpec>, new: &IchorUserSpec) -> Option<Verdict> {
    type Check = fn(&str) -> Result<(), TextError>;
    let fields: [(&str, Option<&String>, Option<&String>, Check); 2] = [
        (
            "spec.displayName",
            new.display_name.as_ref(),
            old.and_then(|o| o.display_name.as_ref()),
            check_display_name,
        ),
        (
            "spec.email",
            new.email.as_ref(),
            old.and_then(|o| o.email.as_ref()),
            check_email,
        ),
    ];
    for (field, value, unchanged_from, check) in fields {
        let Some(value) = value else { continue };
        if unchanged_from == Some(value) {
            continue;
        }
        if let Err(e) = check(value) {
            return Some(Verdict::deny(format!("{field}: {e}")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(display_name: &str) -> IchorUserSpec {
        IchorUserSpec {
            display_name: Some(display_name.to_owned()),
            ..IchorUserSpec::default()
        }
    }

    #[test]
    fn an_unchanged_field_is_not_checked_again_and_a_changed_one_is() {
        let old = spec("Ann\u{1b}[2J");
        assert!(refused_texts(Some(&old), &old).is_none());
        assert!(refused_texts(Some(&spec("Ann")), &old).is_some());
        assert!(refused_texts(None, &spec("Ann B.")).is_none());
    }
}
