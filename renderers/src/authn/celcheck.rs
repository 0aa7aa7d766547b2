//! A partial CEL type checker over [`super::celparse`]'s trees, for the two environments of an
//! `AuthenticationConfiguration`: `claims` (`map(string, any)`) and `user`
//! (`kubernetes.UserInfo`: `username` and `uid` strings, `groups` a `list(string)`, `extra` a
//! `map(string, list(string))`).
//!
//! It gives cel-go's own messages, at cel-go's positions, for what it knows: undeclared
//! references, undefined fields of `user`, selection on a type without fields, and operators
//! and core functions applied to the wrong types (cel-go's standard overloads, `dyn` matching
//! anything). The result type of the whole expression is what the kube-apiserver compares with
//! `bool` for the validation rules. A function it does not know (the Kubernetes libraries
//! have many) makes the type [`Ty::Unknown`]: no error is reported through it and a validation
//! rule whose type is unknown is accepted.

use super::celparse::{Expr, Kind, Lit};

/// A static CEL type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `dyn`.
    Dyn,
    /// `any` (`google.protobuf.Any`): the type of a claim's value. It matches every parameter
    /// as `dyn` does, but it is no comprehension range and it is not `bool`.
    Any,
    /// The type of an expression that already has an error (behaves as `dyn`).
    Error,
    /// Not known to this checker: nothing can be said.
    Unknown,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `null_type`.
    Null,
    /// `list(T)`.
    List(Box<Ty>),
    /// `map(K, V)`.
    Map(Box<Ty>, Box<Ty>),
    /// `optional_type(T)`.
    Opt(Box<Ty>),
    /// `kubernetes.UserInfo`.
    User,
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dyn | Self::Unknown => f.write_str("dyn"),
            Self::Any => f.write_str("any"),
            Self::Error => f.write_str("*error*"),
            Self::Bool => f.write_str("bool"),
            Self::Int => f.write_str("int"),
            Self::Uint => f.write_str("uint"),
            Self::Double => f.write_str("double"),
            Self::String => f.write_str("string"),
            Self::Bytes => f.write_str("bytes"),
            Self::Null => f.write_str("null_type"),
            Self::List(t) => write!(f, "list({t})"),
            Self::Map(k, v) => write!(f, "map({k}, {v})"),
            Self::Opt(t) => write!(f, "optional_type({t})"),
            Self::User => f.write_str("kubernetes.UserInfo"),
        }
    }
}

fn list(t: Ty) -> Ty {
    Ty::List(Box::new(t))
}

impl Ty {
    fn is_loose(&self) -> bool {
        matches!(self, Self::Dyn | Self::Any | Self::Error | Self::Unknown)
    }
}

/// Whether a value of type `a` may be passed where `b` is expected (`dyn` on either side).
fn assignable(a: &Ty, b: &Ty) -> bool {
    match (a, b) {
        _ if a.is_loose() || b.is_loose() => true,
        (Ty::List(x), Ty::List(y)) | (Ty::Opt(x), Ty::Opt(y)) => assignable(x, y),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => assignable(k1, k2) && assignable(v1, v2),
        _ => a == b,
    }
}

/// The binding of a type parameter: the first argument's type, `dyn` for an erroneous one.
fn bind(a: &Ty) -> Ty {
    if matches!(a, Ty::Error | Ty::Unknown) {
        Ty::Dyn
    } else {
        a.clone()
    }
}

/// Names valid at the root of a call target besides variables: the Kubernetes library
/// namespaces (`sets.equivalent(...)`, `optional.of(...)`).
const NAMESPACES: &[&str] = &[
    "sets", "optional", "math", "strings", "base64", "lists", "cel", "encoders", "ext", "google",
];
/// Type names, valid as identifiers (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
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

/// The checker's state for one expression.
pub struct Checker {
    variable: &'static str,
    scopes: Vec<(String, Ty)>,
    /// Errors: byte offset and message.
    pub errors: Vec<(usize, String)>,
}

impl Checker {
    /// A checker for an expression over `variable` (`claims` or `user`).
    pub fn new(variable: &'static str) -> Self {
        Self {
            variable,
            scopes: Vec::new(),
            errors: Vec::new(),
        }
    }

    fn error(&mut self, at: usize, msg: String) -> Ty {
        self.errors.push((at, msg));
        Ty::Error
    }

    /// The type of `e`, recording the errors found in it.
    pub fn check(&mut self, e: &Expr) -> Ty {
        match &e.kind {
            Kind::Lit(l) => match l {
                Lit::Bool => Ty::Bool,
                Lit::Int => Ty::Int,
                Lit::Uint => Ty::Uint,
                Lit::Double => Ty::Double,
                Lit::Str => Ty::String,
                Lit::Bytes => Ty::Bytes,
                Lit::Null => Ty::Null,
            },
            Kind::Ident(name) => self.ident(e.offset, name),
            Kind::Select {
                operand,
                field,
                optional,
            } => {
                let t = self.check(operand);
                let f = self.select(e.offset, &t, field);
                match f {
                    Ty::Error | Ty::Unknown => f,
                    f if *optional => Ty::Opt(Box::new(f)),
                    f => f,
                }
            }
            Kind::List(items) => {
                let types: Vec<Ty> = items.iter().map(|i| self.check(i)).collect();
                match types.split_first() {
                    Some((first, rest)) if rest.iter().all(|t| t == first) => list(first.clone()),
                    _ => list(Ty::Dyn),
                }
            }
            Kind::Map(entries) => {
                for (k, v) in entries {
                    self.check(k);
                    self.check(v);
                }
                Ty::Unknown
            }
            Kind::Struct(values) => {
                for v in values {
                    self.check(v);
                }
                Ty::Unknown
            }
            Kind::Call { target, name, args } => self.call(e.offset, target.as_deref(), name, args),
        }
    }

    fn ident(&mut self, at: usize, name: &str) -> Ty {
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        if name == self.variable {
            return match self.variable {
                "user" => Ty::User,
                _ => Ty::Map(Box::new(Ty::String), Box::new(Ty::Any)),
            };
        }
        if TYPE_NAMES.contains(&name) {
            return Ty::Unknown;
        }
        self.error(at, format!("undeclared reference to '{name}' (in container '')"))
    }

    fn select(&mut self, at: usize, t: &Ty, field: &str) -> Ty {
        match t {
            Ty::Map(_, v) => (**v).clone(),
            Ty::User => match field {
                "username" | "uid" => Ty::String,
                "groups" => list(Ty::String),
                "extra" => Ty::Map(Box::new(Ty::String), Box::new(list(Ty::String))),
                _ => self.error(at, format!("undefined field '{field}'")),
            },
            Ty::Dyn | Ty::Any | Ty::Error => Ty::Dyn,
            Ty::Unknown => Ty::Unknown,
            other => self.error(at, format!("type '{other}' does not support field selection")),
        }
    }

    /// Resolves `name` over `overloads` (parameter lists and result), cel-go style: the results
    /// of every matching overload joined (`dyn` when they differ), or the no-overload error.
    fn resolve(
        &mut self,
        at: usize,
        name: &str,
        member: bool,
        args: &[Ty],
        overloads: &[(Vec<Ty>, Ty)],
    ) -> Ty {
        if args.contains(&Ty::Unknown) {
            return Ty::Unknown;
        }
        let mut result: Option<Ty> = None;
        for (params, out) in overloads {
            if params.len() == args.len() && args.iter().zip(params).all(|(a, p)| assignable(a, p)) {
                result = Some(match result {
                    None => out.clone(),
                    Some(r) if r == *out => r,
                    Some(_) => Ty::Dyn,
                });
            }
        }
        result.unwrap_or_else(|| {
            let shown: Vec<String> = args.iter().map(ToString::to_string).collect();
            let signature = if member {
                format!("{}.({})", shown[0], shown[1..].join(", "))
            } else {
                format!("({})", shown.join(", "))
            };
            self.error(
                at,
                format!("found no matching overload for '{name}' applied to '{signature}'"),
            )
        })
    }

    fn call(&mut self, at: usize, target: Option<&Expr>, name: &str, args: &[Expr]) -> Ty {
        if let Some(t) = target {
            if let Kind::Ident(ns) = &t.kind
                && NAMESPACES.contains(&ns.as_str())
                && ns != self.variable
                && !self.scopes.iter().any(|(n, _)| n == ns)
            {
                args.iter().for_each(|a| {
                    self.check(a);
                });
                return Ty::Unknown;
            }
            if let Some(t) = self.macro_call(t, name, args) {
                return t;
            }
        }
        if target.is_none() && name == "has" && args.len() == 1 {
            if let Kind::Select { operand, field, .. } = &args[0].kind {
                let t = self.check(operand);
                self.select(args[0].offset, &t, field);
            }
            return Ty::Bool;
        }
        let mut types: Vec<Ty> = target.map(|t| self.check(t)).into_iter().collect();
        types.extend(args.iter().map(|a| self.check(a)));
        let member = target.is_some();
        let (t, u) = (types.first().cloned(), types.get(1).cloned());
        use Ty::{Bool, Bytes, Double, Int, String as Str, Uint};
        let same =
            |ts: &[Ty], out: fn(&Ty) -> Ty| ts.iter().map(|t| (vec![t.clone(), t.clone()], out(t))).collect();
        let overloads: Vec<(Vec<Ty>, Ty)> = match (member, name) {
            (false, "_&&_" | "_||_") => vec![(vec![Bool, Bool], Bool)],
            (false, "!_") => vec![(vec![Bool], Bool)],
            (false, "-_") => vec![(vec![Int], Int), (vec![Double], Double)],
            (false, "_==_" | "_!=_") => {
                let p = bind(&t.unwrap_or(Ty::Dyn));
                vec![(vec![p.clone(), p], Bool)]
            }
            (false, "_<_" | "_<=_" | "_>_" | "_>=_") => {
                let mut o: Vec<(Vec<Ty>, Ty)> = same(&[Bool, Int, Uint, Double, Str, Bytes], |_| Bool);
                for (x, y) in [
                    (Int, Uint),
                    (Int, Double),
                    (Uint, Int),
                    (Uint, Double),
                    (Double, Int),
                    (Double, Uint),
                ] {
                    o.push((vec![x, y], Bool));
                }
                o
            }
            (false, "_+_") => {
                let mut o = same(&[Int, Uint, Double, Str, Bytes], Clone::clone);
                let elem = match (&t, &u) {
                    (Some(Ty::List(a)), Some(Ty::List(_))) => bind(a),
                    _ => Ty::Dyn,
                };
                o.push((vec![list(elem.clone()), list(elem.clone())], list(elem)));
                o
            }
            (false, "_-_" | "_*_" | "_/_") => same(&[Int, Uint, Double], Clone::clone),
            (false, "_%_") => same(&[Int, Uint], Clone::clone),
            (false, "_?_:_") => {
                let r = bind(&u.unwrap_or(Ty::Dyn));
                vec![(vec![Bool, r.clone(), r.clone()], r)]
            }
            (false, "@in") => {
                let a = t.unwrap_or(Ty::Dyn);
                vec![
                    (vec![a.clone(), list(a.clone())], Bool),
                    (vec![a.clone(), Ty::Map(Box::new(a), Box::new(Ty::Dyn))], Bool),
                ]
            }
            (false, "_[_]") => match t {
                Some(Ty::List(e)) => vec![(vec![list((*e).clone()), Int], *e)],
                Some(Ty::Map(k, v)) => vec![(vec![Ty::Map(k.clone(), v.clone()), *k], *v)],
                Some(x) if x.is_loose() => return if x == Ty::Unknown { x } else { Ty::Dyn },
                _ => vec![
                    (vec![list(Ty::Dyn), Int], Ty::Dyn),
                    (
                        vec![Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn)), Ty::Dyn],
                        Ty::Dyn,
                    ),
                ],
            },
            (_, "size") => {
                let mut o: Vec<(Vec<Ty>, Ty)> = [Str, Bytes, list(Ty::Dyn)]
                    .into_iter()
                    .map(|t| (vec![t], Int))
                    .collect();
                o.push((vec![Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn))], Int));
                o
            }
            (true, "contains" | "startsWith" | "endsWith" | "matches") => vec![(vec![Str, Str], Bool)],
            (true, "lowerAscii" | "upperAscii" | "trim") => vec![(vec![Str], Str)],
            (true, "orValue") => match t {
                Some(Ty::Opt(v)) => vec![(vec![Ty::Opt(v.clone()), (*v).clone()], *v)],
                _ => return Ty::Unknown,
            },
            (true, "hasValue") => vec![(vec![Ty::Opt(Box::new(Ty::Dyn))], Bool)],
            (true, "value") => match t {
                Some(Ty::Opt(v)) => vec![(vec![Ty::Opt(v.clone())], *v)],
                _ => return Ty::Unknown,
            },
            _ => return Ty::Unknown,
        };
        self.resolve(at, name, member, &types, &overloads)
    }

    /// The comprehension macros `all`, `exists`, `exists_one`, `map`, `filter` (one variable).
    fn macro_call(&mut self, target: &Expr, name: &str, args: &[Expr]) -> Option<Ty> {
        let (Some(Kind::Ident(var)), n) = (args.first().map(|a| &a.kind), args.len()) else {
            return None;
        };
        let arity_ok = match name {
            "all" | "exists" | "exists_one" | "filter" => n == 2,
            "map" => n == 2 || n == 3,
            _ => false,
        };
        if !arity_ok {
            return None;
        }
        let range = self.check(target);
        let elem = match &range {
            Ty::List(e) => (**e).clone(),
            Ty::Map(k, _) => (**k).clone(),
            Ty::Dyn | Ty::Error => Ty::Dyn,
            Ty::Unknown => Ty::Unknown,
            other => self.error(
                target.offset,
                format!("expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"),
            ),
        };
        self.scopes.push((var.clone(), elem.clone()));
        let types: Vec<Ty> = args[1..].iter().map(|a| self.check(a)).collect();
        self.scopes.pop();
        let last = types.last().cloned().unwrap_or(Ty::Unknown);
        Some(match name {
            "map" => list(last),
            "filter" => list(elem),
            _ if last == Ty::Bool || last.is_loose() => Ty::Bool,
            _ => Ty::Unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::celparse::parse;

    fn check(variable: &'static str, src: &str) -> (Ty, Vec<String>) {
        let mut c = Checker::new(variable);
        let t = c.check(&parse(src).unwrap());
        (
            t,
            c.errors.into_iter().map(|(at, m)| format!("{at}: {m}")).collect(),
        )
    }

    #[test]
    fn types_the_user_variable() {
        assert_eq!(
            check("user", "!user.username.startsWith('system:')"),
            (Ty::Bool, vec![])
        );
        assert_eq!(
            check("user", "!user.groups.exists(g, g.startsWith('system:'))"),
            (Ty::Bool, vec![])
        );
        assert_eq!(check("user", "user.username"), (Ty::String, vec![]));
        assert_eq!(check("user", "user.foo == 1").1, ["4: undefined field 'foo'"]);
        assert_eq!(check("user", "'x' in user.groups"), (Ty::Bool, vec![]));
    }

    #[test]
    fn types_claims_as_a_map_of_dyn() {
        assert_eq!(check("claims", "claims.sub"), (Ty::Any, vec![]));
        assert_eq!(
            check("claims", "claims.groups.map(g, g)").1,
            [
                "6: expression of type 'any' cannot be range of a comprehension (must be list, map, or dynamic)"
            ]
        );
        assert_eq!(check("claims", "claims.hd == 'x'"), (Ty::Bool, vec![]));
        assert_eq!(check("claims", "size(claims.groups) > 0"), (Ty::Bool, vec![]));
        assert_eq!(
            check("claims", "claims.?email_verified.orValue(true) == true").0,
            Ty::Bool
        );
        assert_eq!(
            check("claims", "sets.equivalent(claims.aud, ['a'])").0,
            Ty::Unknown
        );
    }

    #[test]
    fn reports_no_matching_overload_as_cel_go_does() {
        assert_eq!(
            check("claims", "1 + 'a'").1,
            ["2: found no matching overload for '_+_' applied to '(int, string)'"]
        );
        assert_eq!(
            check("user", "user.groups.startsWith('a')").1,
            ["22: found no matching overload for 'startsWith' applied to 'list(string).(string)'"]
        );
    }
}
