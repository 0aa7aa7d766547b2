//! A parser of CEL expressions into the shape cel-go's parser gives them, with each node at the
//! offset cel-go reports it at (an operator at its operator token, a selection at its `.`, a
//! call at its `(`, an index at its `[`), so [`super::celcheck`] can report type errors where
//! cel-go does.
//!
//! It follows the CEL grammar (`CEL.g4`): ternary, `||`, `&&`, relations (`in` included),
//! additive and multiplicative operators, unary `!`/`-`, member selection (also `.?`), calls,
//! indexes (also `[?`), list, map and message literals, and the literals. Its syntax error
//! messages are not cel-go's (those come from ANTLR); [`super::cel`] only uses them when it
//! has nothing better.

/// A literal's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lit {
    /// `true`, `false`.
    Bool,
    /// `1`, `0x1F`, `-1`.
    Int,
    /// `1u`.
    Uint,
    /// `1.5`, `1e3`.
    Double,
    /// `'a'`, `"a"`, `r'a'`, `'''a'''`.
    Str,
    /// `b'a'`.
    Bytes,
    /// `null`.
    Null,
}

/// One expression node at the byte offset cel-go reports it at.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Byte offset in the source.
    pub offset: usize,
    /// What the node is.
    pub kind: Kind,
}

/// The node kinds (cel-go's, before macro expansion).
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A literal.
    Lit(Lit),
    /// An identifier (a leading `.` is dropped).
    Ident(String),
    /// `operand.field` or, when `optional`, `operand.?field`.
    Select {
        /// What the field is selected from.
        operand: Box<Expr>,
        /// The field.
        field: String,
        /// `.?` selection.
        optional: bool,
    },
    /// A function or operator call (`_+_`, `_[_]`, `!_`, `_?_:_`, `@in`, `size`, ...).
    Call {
        /// The receiver of a member call.
        target: Option<Box<Expr>>,
        /// The function or operator name, as cel-go names it.
        name: String,
        /// The arguments.
        args: Vec<Expr>,
    },
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{k: v}`.
    Map(Vec<(Expr, Expr)>),
    /// `Name{field: v}`.
    Struct(Vec<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Lit(Lit),
    Op(&'static str),
    Eof,
}

const OPERATORS: [&str; 24] = [
    "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "+", "-", "*", "/", "%", "(", ")", "[", "]", "{", "}",
    ".", ",", "?", ":",
];

/// A syntax error: byte offset and message.
pub type SyntaxError = (usize, String);

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, SyntaxError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(b.len(), |n| i + n);
            continue;
        }
        let start = i;
        // String and bytes literals with their r/R/b/B prefixes.
        let mut j = i;
        let (mut raw, mut bytes) = (false, false);
        while j < b.len() && j - i < 2 && matches!(b[j], b'r' | b'R' | b'b' | b'B') {
            raw |= matches!(b[j], b'r' | b'R');
            bytes |= matches!(b[j], b'b' | b'B');
            j += 1;
        }
        if j < b.len() && matches!(b[j], b'"' | b'\'') {
            let q = b[j];
            let triple = b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q);
            let mut k = if triple { j + 3 } else { j + 1 };
            let mut closed = false;
            while k < b.len() {
                if b[k] == b'\\' && !raw {
                    k += 2;
                    continue;
                }
                if triple {
                    if b[k] == q && b.get(k + 1) == Some(&q) && b.get(k + 2) == Some(&q) {
                        k += 3;
                        closed = true;
                        break;
                    }
                } else if b[k] == q {
                    k += 1;
                    closed = true;
                    break;
                } else if b[k] == b'\n' {
                    break;
                }
                k += 1;
            }
            if !closed {
                return Err((start, "Syntax error: unterminated string literal".into()));
            }
            out.push((Tok::Lit(if bytes { Lit::Bytes } else { Lit::Str }), start));
            i = k.min(b.len());
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &src[start..i];
            out.push((
                match word {
                    "true" | "false" => Tok::Lit(Lit::Bool),
                    "null" => Tok::Lit(Lit::Null),
                    "in" => Tok::Op("in"),
                    _ => Tok::Ident(word.to_string()),
                },
                start,
            ));
            continue;
        }
        if c.is_ascii_digit() || c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            let mut lit = Lit::Int;
            if src[i..].starts_with("0x") || src[i..].starts_with("0X") {
                i += 2;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    i += 1;
                }
            } else {
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                if i < b.len() && b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    lit = Lit::Double;
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                if i < b.len() && matches!(b[i], b'e' | b'E') {
                    let mut k = i + 1;
                    if k < b.len() && matches!(b[k], b'+' | b'-') {
                        k += 1;
                    }
                    if k < b.len() && b[k].is_ascii_digit() {
                        lit = Lit::Double;
                        i = k;
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
            }
            if lit == Lit::Int && i < b.len() && matches!(b[i], b'u' | b'U') {
                lit = Lit::Uint;
                i += 1;
            }
            out.push((Tok::Lit(lit), start));
            continue;
        }
        let Some(op) = OPERATORS.iter().find(|op| src[i..].starts_with(**op)) else {
            let ch = src[i..].chars().next().unwrap_or(' ');
            return Err((i, format!("Syntax error: token recognition error at: '{ch}'")));
        };
        out.push((Tok::Op(op), start));
        i += op.len();
    }
    out.push((Tok::Eof, src.len()));
    Ok(out)
}

/// The deepest nesting the parser follows (cel-go's default recursion limit is 250).
const MAX_DEPTH: usize = 200;

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    depth: usize,
}

/// Parses `src`.
pub fn parse(src: &str) -> Result<Expr, SyntaxError> {
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
        depth: 0,
    };
    let e = p.expr()?;
    match p.peek() {
        Tok::Eof => Ok(e),
        _ => Err(p.unexpected()),
    }
}

/// Whether `e` is a dotted name (`a.b.C`), which a `{` makes a message literal.
fn is_qualified_name(e: &Expr) -> bool {
    match &e.kind {
        Kind::Ident(_) => true,
        Kind::Select {
            operand,
            optional: false,
            ..
        } => is_qualified_name(operand),
        _ => false,
    }
}

fn node(offset: usize, kind: Kind) -> Expr {
    Expr { offset, kind }
}

fn call(offset: usize, name: &str, target: Option<Expr>, args: Vec<Expr>) -> Expr {
    node(
        offset,
        Kind::Call {
            target: target.map(Box::new),
            name: name.to_string(),
            args,
        },
    )
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].0
    }

    fn offset(&self) -> usize {
        self.toks[self.pos.min(self.toks.len() - 1)].1
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Tok::Op(o) if *o == op)
    }

    fn eat(&mut self, op: &str) -> Option<usize> {
        self.is_op(op).then(|| {
            let at = self.offset();
            self.pos += 1;
            at
        })
    }

    fn unexpected(&self) -> SyntaxError {
        let what = match self.peek() {
            Tok::Eof => "<EOF>".to_string(),
            Tok::Op(o) => (*o).to_string(),
            Tok::Ident(i) => i.clone(),
            Tok::Lit(_) => "literal".to_string(),
        };
        (self.offset(), format!("Syntax error: unexpected '{what}'"))
    }

    fn expect(&mut self, op: &str) -> Result<usize, SyntaxError> {
        self.eat(op).ok_or_else(|| self.unexpected())
    }

    fn expr(&mut self) -> Result<Expr, SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err((self.offset(), "expression recursion limit exceeded".into()));
        }
        let cond = self.binary(0)?;
        let e = if let Some(at) = self.eat("?") {
            let yes = self.binary(0)?;
            self.expect(":")?;
            let no = self.expr()?;
            call(at, "_?_:_", None, vec![cond, yes, no])
        } else {
            cond
        };
        self.depth -= 1;
        Ok(e)
    }

    /// Binary operators by precedence level: `||`, `&&`, relations, additive, multiplicative.
    fn binary(&mut self, level: usize) -> Result<Expr, SyntaxError> {
        const LEVELS: [&[&str]; 5] = [
            &["||"],
            &["&&"],
            &["==", "!=", "<", "<=", ">", ">=", "in"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        while let Tok::Op(op) = self.peek().clone() {
            if !LEVELS[level].contains(&op) {
                break;
            }
            let at = self.offset();
            self.pos += 1;
            let right = self.binary(level + 1)?;
            let name = if op == "in" {
                "@in".to_string()
            } else {
                format!("_{op}_")
            };
            left = call(at, &name, None, vec![left, right]);
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, SyntaxError> {
        for op in ["!", "-"] {
            if self.is_op(op) {
                let at = self.offset();
                let mut n = 0;
                while self.eat(op).is_some() {
                    n += 1;
                }
                let operand = self.member()?;
                return Ok(if n % 2 == 0 {
                    operand
                } else {
                    call(at, &format!("{op}_"), None, vec![operand])
                });
            }
        }
        self.member()
    }

    fn member(&mut self) -> Result<Expr, SyntaxError> {
        let mut e = self.primary()?;
        loop {
            if let Some(dot) = self.eat(".") {
                let optional = self.eat("?").is_some();
                let Tok::Ident(field) = self.peek().clone() else {
                    return Err(self.unexpected());
                };
                self.pos += 1;
                if !optional && let Some(open) = self.eat("(") {
                    let args = self.args(")")?;
                    e = call(open, &field, Some(e), args);
                } else {
                    e = node(
                        dot,
                        Kind::Select {
                            operand: Box::new(e),
                            field,
                            optional,
                        },
                    );
                }
            } else if is_qualified_name(&e)
                && let Some(open) = self.eat("{")
            {
                e = self.message(open)?;
            } else if let Some(open) = self.eat("[") {
                let name = if self.eat("?").is_some() { "_[?_]" } else { "_[_]" };
                let index = self.expr()?;
                self.expect("]")?;
                e = call(open, name, None, vec![e, index]);
            } else {
                return Ok(e);
            }
        }
    }

    fn args(&mut self, close: &str) -> Result<Vec<Expr>, SyntaxError> {
        self.items(close, Self::expr)
    }

    /// Comma-separated items up to `close` (already past the opening token), each optionally
    /// marked `?`, with a trailing comma allowed: arguments, list and map entries, fields.
    fn items<T>(
        &mut self,
        close: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, SyntaxError>,
    ) -> Result<Vec<T>, SyntaxError> {
        let mut items = Vec::new();
        if self.eat(close).is_some() {
            return Ok(items);
        }
        loop {
            self.eat("?");
            items.push(item(self)?);
            if self.eat(",").is_some() {
                if self.eat(close).is_some() {
                    return Ok(items);
                }
                continue;
            }
            self.expect(close)?;
            return Ok(items);
        }
    }

    fn primary(&mut self) -> Result<Expr, SyntaxError> {
        let at = self.offset();
        match self.peek().clone() {
            Tok::Lit(l) => {
                self.pos += 1;
                Ok(node(at, Kind::Lit(l)))
            }
            Tok::Ident(name) => {
                self.pos += 1;
                self.ident(at, name)
            }
            Tok::Op(".") => {
                self.pos += 1;
                let Tok::Ident(name) = self.peek().clone() else {
                    return Err(self.unexpected());
                };
                let at = self.offset();
                self.pos += 1;
                self.ident(at, name)
            }
            Tok::Op("(") => {
                self.pos += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Op("[") => {
                self.pos += 1;
                Ok(node(at, Kind::List(self.args("]")?)))
            }
            Tok::Op("{") => {
                self.pos += 1;
                let entries = self.items("}", |p| {
                    let k = p.expr()?;
                    p.expect(":")?;
                    let v = p.expr()?;
                    Ok((k, v))
                })?;
                Ok(node(at, Kind::Map(entries)))
            }
            _ => Err(self.unexpected()),
        }
    }

    /// After an identifier: a global call, a message literal `a.b.C{...}` or the identifier.
    fn ident(&mut self, at: usize, name: String) -> Result<Expr, SyntaxError> {
        if let Some(open) = self.eat("(") {
            let args = self.args(")")?;
            return Ok(call(open, &name, None, args));
        }
        if let Some(open) = self.eat("{") {
            return self.message(open);
        }
        Ok(node(at, Kind::Ident(name)))
    }

    /// The fields of a message literal, after its `{`.
    fn message(&mut self, open: usize) -> Result<Expr, SyntaxError> {
        let values = self.items("}", |p| {
            if !matches!(p.peek(), Tok::Ident(_)) {
                return Err(p.unexpected());
            }
            p.pos += 1;
            p.expect(":")?;
            p.expr()
        })?;
        Ok(node(open, Kind::Struct(values)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(src: &str) -> Expr {
        parse(src).unwrap()
    }

    #[test]
    fn places_nodes_where_cel_go_does() {
        let e = offsets("user.foo == 1");
        assert_eq!(e.offset, 9, "the operator");
        let Kind::Call { args, .. } = &e.kind else {
            panic!()
        };
        assert_eq!(args[0].offset, 4, "the selection's dot");
        let e = offsets("claims.sub.startsWith('a')");
        assert_eq!(e.offset, 21, "a member call's open parenthesis");
        assert_eq!(offsets("size(claims.x)").offset, 4);
        assert_eq!(offsets("claims['a']").offset, 6);
        assert_eq!(offsets("true ? 1 : 2").offset, 5);
    }

    #[test]
    fn parses_the_grammar() {
        for src in [
            "!user.username.startsWith('system:')",
            "!user.groups.exists(g, g.startsWith('system:'))",
            "claims.?email_verified.orValue(true) == true",
            "a || b && c == d + e * -f",
            "'x' in user.groups",
            "[1, 2,][0]",
            "{'a': 1,}.a",
            "google.protobuf.Value{}",
            "claims[?'a'].orValue('')",
            ".claims.sub",
            "r'raw\\' + b\"bytes\" + '''tri'ple'''",
            "1u + 0x1F + 1.5e3 + .5",
        ] {
            assert!(parse(src).is_ok(), "{src}");
        }
    }

    #[test]
    fn refuses_what_does_not_parse() {
        for src in [
            "claims.x ==",
            "(claims.x",
            "claims.x)",
            "claims.x == 'a",
            "a.",
            "a ? b",
            "#",
            "",
        ] {
            assert!(parse(src).is_err(), "{src}");
        }
    }
}
