//! A conservative, syntactic stand-in for the kube-apiserver's CEL compilation of the
//! expressions in an `AuthenticationConfiguration`.
//!
//! We cannot run CEL. What this module does instead (spec §7):
//! - the two expressions this project emits are accepted exactly (they are known to compile
//!   with the `user` variable and to have type bool);
//! - any other expression is tokenised (identifiers, numbers, string and bytes literals with
//!   their quoting forms, punctuation). It is refused when a string literal is unterminated or
//!   the brackets `()[]{}` do not balance (a `Syntax error` whose text only approximates the
//!   CEL parser's), or when it reads an undeclared variable: an identifier used at the root of
//!   a selection (not after `.`, not called as a function, not a comprehension variable, not a
//!   known namespace or type name) other than the environment's own variable. That last check
//!   reproduces CEL's exact message, e.g. `ERROR: <input>:1:1: undeclared reference to 'user'
//!   (in container '')` followed by the source line and a caret;
//! - a rule that must be bool and is a lone string, number or null literal gets
//!   `must evaluate to bool`;
//! - everything else is accepted ("compilation not checked"): type errors, unknown functions
//!   and most parse errors are found only by the kube-apiserver.
//!
//! It also finds, syntactically as upstream does, `claims.email` / `claims.?email` and
//! `claims.email_verified` selections (rule V-M10).

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

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Number,
    Str,
    Punct(char),
    Op,
}

struct Token {
    tok: Tok,
    offset: usize,
}

/// Names valid at the root of an expression besides the variable: namespaces of the Kubernetes
/// CEL libraries, type names and literals.
const KNOWN_ROOTS: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "sets",
    "optional",
    "math",
    "strings",
    "base64",
    "lists",
    "cel",
    "encoders",
    "google",
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

/// Macros whose leading identifier arguments bind comprehension variables.
const BINDING_MACROS: &[&str] = &[
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "bind",
    "transformList",
    "transformMap",
    "transformMapEntry",
    "sortBy",
];

/// Checks an expression for `env`; `must_be_bool` for validation rules.
pub fn check(expr: &str, env: Env, must_be_bool: bool) -> Result<CelInfo, CelError> {
    if env == Env::User && (expr == RULE_NO_SYSTEM_USERNAME || expr == RULE_NO_SYSTEM_GROUPS) {
        return Ok(CelInfo::default());
    }
    let tokens = tokenize(expr).map_err(|(offset, msg)| CelError::Compile(display(expr, offset, &msg)))?;
    check_brackets(expr, &tokens)?;

    let bound = bound_variables(&tokens);
    let mut errors = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let Tok::Ident(name) = &t.tok else { continue };
        let after_dot = i > 0 && matches!(tokens[i - 1].tok, Tok::Punct('.'))
            || i > 1 && tokens[i - 1].tok == Tok::Punct('?') && tokens[i - 2].tok == Tok::Punct('.');
        let called = matches!(tokens.get(i + 1).map(|t| &t.tok), Some(Tok::Punct('(' | '{')));
        if after_dot || called || name == env.variable() || bound.contains(name) {
            continue;
        }
        if KNOWN_ROOTS.contains(&name.as_str()) {
            continue;
        }
        errors.push(display(
            expr,
            t.offset,
            &format!("undeclared reference to '{name}' (in container '')"),
        ));
    }
    if !errors.is_empty() {
        return Err(CelError::Compile(errors.join("\n")));
    }
    if must_be_bool && tokens.len() == 1 {
        let non_bool = match &tokens[0].tok {
            Tok::Number | Tok::Str => true,
            Tok::Ident(n) => n == "null",
            _ => false,
        };
        if non_bool {
            return Err(CelError::NotBool);
        }
    }
    Ok(CelInfo {
        uses_email: selects_claim(&tokens, "email"),
        uses_email_verified: selects_claim(&tokens, "email_verified"),
    })
}

/// Whether `claims.<field>` or `claims.?<field>` is selected directly on the root `claims`.
fn selects_claim(tokens: &[Token], field: &str) -> bool {
    tokens.iter().enumerate().any(|(i, t)| {
        let root = t.tok == Tok::Ident("claims".into()) && !(i > 0 && tokens[i - 1].tok == Tok::Punct('.'));
        if !root || tokens.get(i + 1).map(|t| &t.tok) != Some(&Tok::Punct('.')) {
            return false;
        }
        let mut j = i + 2;
        if tokens.get(j).map(|t| &t.tok) == Some(&Tok::Punct('?')) {
            j += 1;
        }
        tokens.get(j).map(|t| &t.tok) == Some(&Tok::Ident(field.into()))
    })
}

/// Identifiers that a macro binds: the leading identifier arguments of `x.all(v, ...)`,
/// `x.map(k, v, ...)`, `cel.bind(v, ...)`, and so on (scope-insensitive, so lenient).
fn bound_variables(tokens: &[Token]) -> Vec<String> {
    let mut bound = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let Tok::Ident(name) = &t.tok else { continue };
        if !BINDING_MACROS.contains(&name.as_str())
            || tokens.get(i + 1).map(|t| &t.tok) != Some(&Tok::Punct('('))
        {
            continue;
        }
        let mut j = i + 2;
        while let (Some(Tok::Ident(v)), Some(Tok::Punct(','))) =
            (tokens.get(j).map(|t| &t.tok), tokens.get(j + 1).map(|t| &t.tok))
        {
            bound.push(v.clone());
            j += 2;
        }
    }
    bound
}

fn check_brackets(expr: &str, tokens: &[Token]) -> Result<(), CelError> {
    let mut stack: Vec<(char, usize)> = Vec::new();
    for t in tokens {
        match t.tok {
            Tok::Punct(c @ ('(' | '[' | '{')) => stack.push((c, t.offset)),
            Tok::Punct(c @ (')' | ']' | '}')) => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                match stack.pop() {
                    Some((open, _)) if open == want => {}
                    _ => {
                        return Err(CelError::Compile(display(
                            expr,
                            t.offset,
                            &format!("Syntax error: unexpected '{c}'"),
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    if let Some((open, offset)) = stack.pop() {
        return Err(CelError::Compile(display(
            expr,
            offset,
            &format!("Syntax error: unclosed '{open}'"),
        )));
    }
    Ok(())
}

fn tokenize(expr: &str) -> Result<Vec<Token>, (usize, String)> {
    let chars: Vec<(usize, char)> = expr.char_indices().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (offset, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1).map(|x| x.1) == Some('/') {
            while i < chars.len() && chars[i].1 != '\n' {
                i += 1;
            }
            continue;
        }
        // String and bytes literals with optional r/R/b/B prefixes.
        let mut j = i;
        let mut raw = false;
        while j < chars.len() && j - i < 2 && matches!(chars[j].1, 'r' | 'R' | 'b' | 'B') {
            raw |= matches!(chars[j].1, 'r' | 'R');
            j += 1;
        }
        if j < chars.len() && matches!(chars[j].1, '"' | '\'') {
            let q = chars[j].1;
            let triple = chars.get(j + 1).map(|x| x.1) == Some(q) && chars.get(j + 2).map(|x| x.1) == Some(q);
            let mut k = if triple { j + 3 } else { j + 1 };
            let mut closed = false;
            while k < chars.len() {
                let ch = chars[k].1;
                if ch == '\\' && !raw {
                    k += 2;
                    continue;
                }
                if triple {
                    if ch == q
                        && chars.get(k + 1).map(|x| x.1) == Some(q)
                        && chars.get(k + 2).map(|x| x.1) == Some(q)
                    {
                        k += 3;
                        closed = true;
                        break;
                    }
                } else if ch == q {
                    k += 1;
                    closed = true;
                    break;
                } else if ch == '\n' {
                    break;
                }
                k += 1;
            }
            if !closed {
                return Err((offset, "Syntax error: unterminated string literal".into()));
            }
            tokens.push(Token {
                tok: Tok::Str,
                offset,
            });
            i = k;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let mut k = i;
            while k < chars.len() && (chars[k].1.is_ascii_alphanumeric() || chars[k].1 == '_') {
                k += 1;
            }
            let name: String = chars[i..k].iter().map(|x| x.1).collect();
            tokens.push(Token {
                tok: Tok::Ident(name),
                offset,
            });
            i = k;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|x| x.1.is_ascii_digit())) {
            let mut k = i;
            while k < chars.len() && (chars[k].1.is_ascii_alphanumeric() || chars[k].1 == '.') {
                let prev = chars[k].1;
                k += 1;
                if matches!(prev, 'e' | 'E') && chars.get(k).is_some_and(|x| matches!(x.1, '+' | '-')) {
                    k += 1;
                }
            }
            tokens.push(Token {
                tok: Tok::Number,
                offset,
            });
            i = k;
            continue;
        }
        if matches!(c, '(' | ')' | '[' | ']' | '{' | '}' | '.' | ',' | '?' | ':') {
            tokens.push(Token {
                tok: Tok::Punct(c),
                offset,
            });
        } else if "!=<>&|+-*/%".contains(c) {
            tokens.push(Token { tok: Tok::Op, offset });
        } else {
            return Err((offset, format!("Syntax error: token recognition error at: '{c}'")));
        }
        i += 1;
    }
    Ok(tokens)
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
            "claims.groups.all(g, g.startsWith('x'))",
            "sets.equivalent(claims.aud, ['a'])",
            "claims.?email_verified.orValue(true) == true",
            "claims.roles.map(k, v, k + v).size() > 0",
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
