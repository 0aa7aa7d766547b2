//! The rule table: which change to which machine-config field costs what.
//!
//! A rule names a document kind and a field-path prefix inside that document; a change is
//! classified by the most specific rule that covers it (longest prefix), and by [`DEFAULT_RULE`]
//! when none does. The table is deliberately small: every entry is a fact read from Talos source
//! or measured on hardware, with the source in its comment. A kind or field nobody has checked
//! stays on the conservative default, `RebootRequired`.

use std::fmt;

use serde::Serialize;

/// What applying a change to a machine configuration costs the machine.
///
/// The order is the cost: `Safe < APIServerRestart < RebootRequired`, so the class of a set of
/// changes is the maximum of its members'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ChangeClass {
    /// Applied live, nothing restarts that a user would notice.
    Safe,
    /// Applied live, but the kube-apiserver static pod restarts: its `/readyz` is down for a
    /// while, so control planes are rolled one at a time.
    #[serde(rename = "APIServerRestart")]
    ApiServerRestart,
    /// Takes effect only after a reboot (or nobody has verified that it does not).
    RebootRequired,
}

impl fmt::Display for ChangeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Safe => "Safe",
            Self::ApiServerRestart => "APIServerRestart",
            Self::RebootRequired => "RebootRequired",
        })
    }
}

/// One entry of a rule table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// The document kind the rule is about (`KubeAuthenticationConfig`; `v1alpha1` for the
    /// legacy main document, which has no `kind`). `*` only in [`DEFAULT_RULE`].
    pub kind: &'static str,
    /// Dot-separated field path inside the document; empty for the whole document. Matches
    /// whole segments: `machine.install` covers `machine.install.image`, not `machine.installer`.
    pub prefix: &'static str,
    /// The class of every change the rule covers.
    pub class: ChangeClass,
    /// Why, with its source: printed by `ichor render` next to each changed path.
    pub why: &'static str,
}

impl Rule {
    /// The prefix as path segments (empty for a whole-document rule).
    pub(crate) fn prefix_segments(&self) -> impl Iterator<Item = &'static str> {
        self.prefix.split('.').filter(|s| !s.is_empty())
    }

    /// How many segments the prefix has (the rule's specificity).
    pub(crate) fn specificity(&self) -> usize {
        self.prefix_segments().count()
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "{} (whole document) → {}", self.kind, self.class)
        } else {
            write!(f, "{} {} → {}", self.kind, self.prefix, self.class)
        }
    }
}

/// The rule for anything no entry of the table covers.
///
/// Conservative on purpose: a change nobody has checked is assumed to need a reboot, so it is
/// never applied live behind an operator's back (seed 000, Decision 3 "Rollout": "`pkg/fieldmeta`
/// has no rule for `KubeAuthenticationConfig`, so the default applies: reboot-required").
pub const DEFAULT_RULE: Rule = Rule {
    kind: "*",
    prefix: "",
    class: ChangeClass::RebootRequired,
    why: "no rule covers this field, so it is treated as needing a reboot (the conservative default)",
};

/// The rule table Ichor uses.
pub const RULES: &[Rule] = &[
    // Seed 000, "Amendment: Hardware results" item 1 and "Amendment: the apiserver restart rolls
    // out one control plane at a time"; spec talos-kube-authentication-config.md §2 item 6: the
    // document's version is part of the kube-apiserver static pod's config version, so ANY change
    // restarts the kube-apiserver, with no reboot (/readyz down 15–45 s on hardware).
    Rule {
        kind: "KubeAuthenticationConfig",
        prefix: "",
        class: ChangeClass::ApiServerRestart,
        why: "Talos re-renders the kube-apiserver static pod on any change to this document: \
              the API server restarts, the machine does not reboot",
    },
    // Spec talos-machine-api.md §6.2 ("Kubernetes control-plane documents are live, by
    // restarting the static pod"): KubeAPIServerConfig is the kube-apiserver's own settings
    // (flags, image, port), consumed only by its static pod. Also seed 000 Decision 3, which
    // records the Go code base's rule for it as applied live (fieldmeta.go:212).
    Rule {
        kind: "KubeAPIServerConfig",
        prefix: "",
        class: ChangeClass::ApiServerRestart,
        why: "the kube-apiserver settings are applied by restarting its static pod, without a reboot",
    },
    // Spec talos-machine-api.md §6.2 "Changes which might need a reboot": the install section is
    // used only at install or upgrade and has no effect on an installed node, even after a reboot.
    Rule {
        kind: "v1alpha1",
        prefix: "machine.install",
        class: ChangeClass::Safe,
        why: "the install section is read only at install or upgrade time; an installed node ignores it",
    },
];

/// The most specific rule of `table` covering `path` of a document of `kind`, or [`DEFAULT_RULE`].
///
/// `path` is the field path's segments inside the document; an empty `path` is the whole
/// document (an added or removed document), which only a whole-document rule covers. Two rules
/// of equal specificity for the same place would be a table bug; the first one wins.
pub fn rule_for(table: &[Rule], kind: &str, path: &[String]) -> Rule {
    let mut best: Option<Rule> = None;
    for rule in table.iter().filter(|r| r.kind == kind) {
        let specificity = rule.specificity();
        let covers =
            specificity <= path.len() && rule.prefix_segments().zip(path).all(|(seg, p)| seg == p.as_str());
        if covers && best.is_none_or(|b| specificity > b.specificity()) {
            best = Some(*rule);
        }
    }
    best.unwrap_or(DEFAULT_RULE)
}
