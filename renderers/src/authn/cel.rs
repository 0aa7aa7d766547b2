//! CEL compilation of the expressions in an `AuthenticationConfiguration`, as far as it can be
//! done without cel-go (spec §7).
//!
//! - The two expressions this project emits are accepted at once (they are known to compile
//!   with the `user` variable and to have type bool).
//! - Any other expression is parsed by [`super::celparse`] and type-checked by
//!   [`super::celcheck`] in its environment (`claims` or `user`). Undeclared references,
//!   undefined `user` fields, selection on a type without fields and operators or core
//!   functions applied to the wrong types get cel-go's exact message and caret; a validation
//!   rule whose static type is not `bool` (including `any`, as `claims.sub` is) gets
//!   `must evaluate to bool`.
//! - Syntax errors are found, but their text only approximates cel-go's (which comes from its
//!   ANTLR parser: `mismatched input ... expecting {...}`).
//! - A function the checker does not know makes the type unknown: no error is reported through
//!   it and a rule of unknown type is accepted ("compilation not checked"), so type errors in
//!   calls of the Kubernetes libraries are found only by the kube-apiserver.
//!
//! It also finds, over the parsed tree as upstream does, `claims.email` / `claims.?email` and
//! `claims.email_verified` selections (rule V-M10).

use super::{
    celcheck::{Checker, Ty},
    celparse::{self, Expr, Kind},
};

/// The variable an expression is compiled with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Env {
    /// `claims` (claim validation rules and claim mappings).
    Claims,
    /// `user` (user validation rules).
    User,
}

impl Env {
    fn variable(self) -> &'static str {
        match self {
            Self::Claims => "claims",
            Self::User => "user",
        }
    }
}

/// The user validation rule that refuses a user name in the `system:` namespace.
pub const RULE_NO_SYSTEM_USERNAME: &str = "!user.username.startsWith('system:')";
/// The user validation rule that refuses a group in the `system:` namespace.
pub const RULE_NO_SYSTEM_GROUPS: &str = "!user.groups.exists(g, g.startsWith('system:'))";

/// The user validation rule that refuses a user name in Ichor's `ichor:` namespace (rendered
/// into every external provider's entry: only Ichor's issuer may name `ichor:` users).
pub const RULE_NO_ICHOR_USERNAME: &str = "!user.username.startsWith('ichor:')";
/// The user validation rule that refuses a group in Ichor's `ichor:` namespace (external
/// providers' entries).
pub const RULE_NO_ICHOR_GROUPS: &str = "!user.groups.exists(g, g.startsWith('ichor:'))";

/// The rules this project emits, accepted without parsing (each compiles with the `user`
/// variable and has type bool; the differential test runs them through the kube-apiserver's
/// own validator).
const EMITTED_USER_RULES: [&str; 4] = [
    RULE_NO_SYSTEM_USERNAME,
    RULE_NO_SYSTEM_GROUPS,
    RULE_NO_ICHOR_USERNAME,
    RULE_NO_ICHOR_GROUPS,
];

/// Why an expression was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CelError {
    /// It does not compile: the text after `compilation failed: `.
    Compile(String),
    /// It compiles but its result is not bool.
    NotBool,
}

/// What an accepted expression reads, for rule V-M10.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CelInfo {
    /// It selects `claims.email` (or `claims.?email`).
    pub uses_email: bool,
    /// It selects `claims.email_verified` (or the optional form).
    pub uses_email_verified: bool,
}

/// Checks an expression for `env`; `must_be_bool` for validation rules.
pub fn check(expr: &str, env: Env, must_be_bool: bool) -> Result<CelInfo, CelError> {
    if env == Env::User && EMITTED_USER_RULES.contains(&expr) {
        return Ok(CelInfo::default());
    }
    let tree =
        celparse::parse(expr).map_err(|(offset, msg)| CelError::Compile(display(expr, offset, &msg)))?;
    let mut checker = Checker::new(env.variable());
    let ty = checker.check(&tree);
    if !checker.errors.is_empty() {
        let mut errors = checker.errors;
        errors.sort_by_key(|(offset, _)| *offset);
        let shown: Vec<String> = errors.iter().map(|(o, m)| display(expr, *o, m)).collect();
        return Err(CelError::Compile(shown.join("\n")));
    }
    if must_be_bool && ty != Ty::Bool && ty != Ty::Unknown {
        return Err(CelError::NotBool);
    }
    Ok(CelInfo {
        uses_email: selects_claim(&tree, "email"),
        uses_email_verified: selects_claim(&tree, "email_verified"),
    })
}

/// upstream's `hasSelectExp`: whether `claims.<field>` or `claims.?<field>` is selected directly
/// on the identifier `claims` anywhere in the tree.
fn selects_claim(e: &Expr, field: &str) -> bool {
    match &e.kind {
        Kind::Select {
            operand, field: f, ..
        } => {
            matches!(&operand.kind, Kind::Ident(n) if n == "claims") && f == field
                || selects_claim(operand, field)
        }
        Kind::Call { target, args, .. } => {
            target.as_deref().is_some_and(|t| selects_claim(t, field))
                || args.iter().any(|a| selects_claim(a, field))
        }
        Kind::List(items) | Kind::Struct(items) => items.iter().any(|i| selects_claim(i, field)),
        Kind::Map(entries) => entries
            .iter()
            .any(|(k, v)| selects_claim(k, field) || selects_claim(v, field)),
        Kind::Ident(_) | Kind::Lit(_) => false,
    }
}

/// cel-go's `Error.ToDisplayString`: `ERROR: <input>:L:C: msg`, then the source line and a
/// caret under the column (columns count code points; wide characters use wide dots).
fn display(expr: &str, offset: usize, message: &str) -> String {
    let before = &expr[..offset.min(expr.len())];
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col_chars: Vec<char> = expr[line_start..offset.min(expr.len())].chars().collect();
    let line_text = expr[line_start..]
        .split('\n')
        .next()
        .unwrap_or("")
        .replace('\t', " ");
    let mut out = format!("ERROR: <input>:{}:{}: {}", line_no, col_chars.len() + 1, message);
    out.push_str("\n | ");
    out.push_str(&line_text);
    out.push_str("\n | ");
    for c in &col_chars {
        out.push(if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' });
    }
    let at = expr[offset.min(expr.len())..].chars().next();
    out.push(if at.is_some_and(|c| c.len_utf8() > 1) {
        '\u{ff3e}'
    } else {
        '^'
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile_error(expr: &str, env: Env) -> String {
        match check(expr, env, true) {
            Err(CelError::Compile(m)) => m,
            other => panic!("{expr}: {other:?}"),
        }
    }

    #[test]
    fn accepts_the_two_expressions_this_project_emits() {
        assert_eq!(
            check(RULE_NO_SYSTEM_USERNAME, Env::User, true),
            Ok(CelInfo::default())
        );
        assert_eq!(
            check(RULE_NO_SYSTEM_GROUPS, Env::User, true),
            Ok(CelInfo::default())
        );
    }

    #[test]
    fn reports_an_undeclared_variable_with_cels_exact_text() {
        assert_eq!(
            compile_error("foo.bar", Env::Claims),
            "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo.bar\n | ^"
        );
        assert_eq!(
            compile_error("claims.a == 'x' && user.username == 'y'", Env::Claims),
            "ERROR: <input>:1:20: undeclared reference to 'user' (in container '')\n | claims.a == 'x' && user.username == 'y'\n | ...................^"
        );
        assert!(compile_error("claims.sub != ''", Env::User).contains("undeclared reference to 'claims'"));
    }

    #[test]
    fn accepts_comprehension_variables_namespaces_and_optional_selection() {
        for e in [
            "[claims.a, claims.b].all(g, g == 'x')",
            "sets.equivalent(claims.aud, ['a'])",
            "claims.?email_verified.orValue(true) == true",
            "[1, 2].map(k, k * 2).size() > 0",
            "type(claims.sub) == string && has(claims.sub)",
            r#"claims["a.b"] == "c""#,
        ] {
            assert!(check(e, Env::Claims, true).is_ok(), "{e}");
        }
    }

    #[test]
    fn refuses_unbalanced_brackets_and_unterminated_strings() {
        assert!(compile_error("size(claims.x", Env::Claims).contains("Syntax error"));
        assert!(compile_error("claims.x == 'a", Env::Claims).contains("unterminated string"));
        assert!(compile_error("claims.x)", Env::Claims).contains("Syntax error"));
    }

    #[test]
    fn refuses_a_lone_literal_where_bool_is_required() {
        assert_eq!(check("'yes'", Env::Claims, true), Err(CelError::NotBool));
        assert_eq!(check("42", Env::User, true), Err(CelError::NotBool));
        assert!(check("'yes'", Env::Claims, false).is_ok());
        assert!(check("true", Env::User, true).is_ok());
    }

    #[test]
    fn finds_email_selections_only_directly_on_claims() {
        let info = |e| check(e, Env::Claims, false).unwrap();
        assert!(info("claims.email").uses_email);
        assert!(info("claims.?email.orValue('')").uses_email);
        assert!(!info("claims.email_").uses_email);
        assert!(!info("claims.other.claims.email").uses_email);
        assert!(!info("'claims.email'").uses_email);
        assert!(info("[claims.email_verified, claims.email]").uses_email_verified);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_expressions(expr in "\\PC{0,64}") {
            let _ = check(&expr, Env::Claims, true);
            let _ = check(&expr, Env::User, false);
        }

        #[test]
        fn never_panics_on_expression_shaped_text(expr in "[a-z.?()\\[\\]{}'\"\\\\ ,!=_rb]{0,48}") {
            let _ = check(&expr, Env::Claims, true);
        }
    }
}
