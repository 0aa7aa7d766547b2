//! `jwt[].claimValidationRules` and `jwt[].claimMappings` (username, groups, uid, extra), with
//! the `email_verified` rule.

use super::*;

#[test]
fn claim_validation_rules() {
    let p = "jwt[0].claimValidationRules";
    check("V-R1", claim_rules(&[("hd", "example.com", "", "")]), &[]);
    check(
        "V-R1",
        claim_rules(&[("hd", "", "claims.hd == 'x'", "m")]),
        &[&format!(
            r#"{p}[0]: Invalid value: "hd": claim and expression can't both be set"#
        )],
    );
    check(
        "V-R2",
        claim_rules(&[("", "v", "", "")]),
        &[&format!(
            "{p}[0]: Required value: claim or expression is required"
        )],
    );
    check(
        "V-R3",
        claim_rules(&[("hd", "", "", "m")]),
        &[&format!(
            r#"{p}[0].message: Invalid value: "m": may not be specified when claim is set"#
        )],
    );
    check(
        "V-R4",
        claim_rules(&[("hd", "a", "", ""), ("other", "", "", "")]),
        &[],
    );
    check(
        "V-R4",
        claim_rules(&[("hd", "a", "", ""), ("hd", "b", "", "")]),
        &[&format!(r#"{p}[1].claim: Duplicate value: "hd""#)],
    );
    check(
        "V-R5",
        claim_rules(&[("", "", "claims.hd == 'x'", "hd must be x")]),
        &[],
    );
    check(
        "V-R5",
        claim_rules(&[("", "v", "claims.hd == 'x'", "")]),
        &[&format!(
            r#"{p}[0].requiredValue: Invalid value: "v": may not be specified when expression is set"#
        )],
    );
    check(
        "V-R6",
        claim_rules(&[("", "", "claims.a == 'x'", ""), ("", "", "claims.a == 'x'", "")]),
        &[&format!(
            r#"{p}[1].expression: Duplicate value: "claims.a == 'x'""#
        )],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "sets.equivalent(claims.aud, ['a'])", "")]),
        &[],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "user.username == 'x'", "")]),
        &[&format!(
            "{p}[0].expression: Invalid value: \"user.username == 'x'\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.username == 'x'\n | ^"
        )],
    );
    check(
        "V-R8",
        claim_rules(&[("", "", "'yes'", "")]),
        &[&format!(
            r#"{p}[0].expression: Invalid value: "'yes'": must evaluate to bool"#
        )],
    );
}

#[test]
fn claim_mapping_rules() {
    let p = "jwt[0].claimMappings";
    check("V-M1", username("", None, "claims.sub"), &[]);
    check(
        "V-M1",
        username("sub", Some(""), "claims.sub"),
        &[&format!(
            r#"{p}.username: Invalid value: "": claim and expression can't both be set"#
        )],
    );
    check(
        "V-M2",
        username("", None, ""),
        &[&format!(
            "{p}.username: Required value: claim or expression is required"
        )],
    );
    check(
        "V-M3",
        username("", Some(""), "claims.sub"),
        &[&format!(
            r#"{p}.username.prefix: Invalid value: "": may not be specified when expression is set"#
        )],
    );
    check(
        "V-M4",
        username("", None, "foo.sub"),
        &[&format!(
            "{p}.username.expression: Invalid value: \"foo.sub\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo.sub\n | ^"
        )],
    );
    check("V-M5", username("email", Some(""), ""), &[]);
    check(
        "V-M5",
        username("sub", None, ""),
        &[&format!(
            "{p}.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
        )],
    );
    check("V-M6", groups("", Some("lonely:"), ""), &[]);
    check(
        "V-M6",
        groups("groups", Some(""), "claims.groups"),
        &[&format!(
            r#"{p}.groups: Invalid value: "": claim and expression can't both be set"#
        )],
    );
    check("V-M7", groups("", None, "claims.groups"), &[]);
    check(
        "V-M7",
        groups("", Some("g:"), "claims.groups"),
        &[&format!(
            r#"{p}.groups.prefix: Invalid value: "g:": may not be specified when expression is set"#
        )],
    );
    check("V-M8", groups("groups", Some("oidc:"), ""), &[]);
    check(
        "V-M8",
        groups("groups", None, ""),
        &[&format!(
            "{p}.groups.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
        )],
    );
    check(
        "V-M9",
        groups("", None, "user.groups"),
        &[&format!(
            "{p}.groups.expression: Invalid value: \"user.groups\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.groups\n | ^"
        )],
    );
    check("V-U1", uid("sub", ""), &[]);
    check(
        "V-U1",
        uid("sub", "claims.sub"),
        &[&format!(
            r#"{p}.uid: Invalid value: "": claim and expression can't both be set"#
        )],
    );
    check("V-U2", uid("", "claims.sub"), &[]);
    check(
        "V-U2",
        uid("", "user.uid"),
        &[&format!(
            "{p}.uid.expression: Invalid value: \"user.uid\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.uid\n | ^"
        )],
    );
}

#[test]
fn extra_mapping_rules() {
    let p = "jwt[0].claimMappings.extra";
    check("V-X1", extra(&[("example.org/foo", "claims.foo")]), &[]);
    check(
        "V-X1",
        extra(&[("", "claims.foo")]),
        &[&format!("{p}[0].key: Required value")],
    );
    check(
        "V-X2",
        extra(&[("foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "foo": must be a domain-prefixed path (such as "acme.io/foo")"#
        )],
    );
    check(
        "V-X2",
        extra(&[("example.org/", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "example.org/": must be a domain-prefixed path (such as "acme.io/foo")"#
        )],
    );
    check(
        "V-X3",
        extra(&[("-bad.org/foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "-bad.org": {DOMAIN_DETAIL}"#
        )],
    );
    check("V-X4", extra(&[("example.org/a/b~c:d", "claims.foo")]), &[]);
    check(
        "V-X4",
        extra(&[("example.org/foo bar", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "foo bar": Invalid path (regex used for validation is '[A-Za-z0-9/\-._~%!$&'()*+,;=:]+')"#
        )],
    );
    check(
        "V-X5",
        extra(&[("example.org/Foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "example.org/Foo": must be lowercase"#
        )],
    );
    check(
        "V-X3+X5",
        extra(&[("Example.org/foo", "claims.foo")]),
        &[
            &format!(r#"{p}[0].key: Invalid value: "Example.org": {DOMAIN_DETAIL}"#),
            &format!(r#"{p}[0].key: Invalid value: "Example.org/foo": must be lowercase"#),
        ],
    );
    check("V-X6", extra(&[("ak8s.io/foo", "claims.foo")]), &[]);
    check(
        "V-X6",
        extra(&[("sub.kubernetes.io/foo", "claims.foo")]),
        &[&format!(
            r#"{p}[0].key: Invalid value: "sub.kubernetes.io/foo": k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"#
        )],
    );
    check(
        "V-X7",
        extra(&[("example.org/a", "claims.a"), ("example.org/b", "claims.b")]),
        &[],
    );
    check(
        "V-X7",
        extra(&[("example.org/a", "claims.a"), ("example.org/a", "")]),
        &[&format!(r#"{p}[1].key: Duplicate value: "example.org/a""#)],
    );
    check(
        "V-X8",
        extra(&[("example.org/a", "")]),
        &[&format!("{p}[0].valueExpression: Required value")],
    );
    check(
        "V-X9",
        extra(&[("example.org/a", "dyn(claims.a).map(x, x + 'y')")]),
        &[],
    );
    // A claim's value is `any`, which cel-go does not range over.
    check(
        "V-X9",
        extra(&[("example.org/a", "claims.a.map(x, x + 'y')")]),
        &[&format!(
            "{p}[0].valueExpression: Invalid value: \"claims.a.map(x, x + 'y')\": compilation failed: ERROR: <input>:1:7: expression of type 'any' cannot be range of a comprehension (must be list, map, or dynamic)\n | claims.a.map(x, x + 'y')\n | ......^"
        )],
    );
    check(
        "V-X9",
        extra(&[("example.org/a", "user.extra")]),
        &[&format!(
            "{p}[0].valueExpression: Invalid value: \"user.extra\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'user' (in container '')\n | user.extra\n | ^"
        )],
    );
}

#[test]
fn email_verified_rule() {
    let refused =
        format!(r#"jwt[0].claimMappings.username.expression: Invalid value: "claims.email": {EMAIL_DETAIL}"#);
    check("V-M10", username("", None, "claims.email"), &[&refused]);
    check(
        "V-M10",
        username("", None, "claims.?email.orValue('') + ''"),
        &[&format!(
            r#"jwt[0].claimMappings.username.expression: Invalid value: "claims.?email.orValue('') + ''": {EMAIL_DETAIL}"#
        )],
    );
    check(
        "V-M10",
        |c: &mut Config| {
            username("", None, "claims.email")(c);
            claim_rules(&[("", "", "claims.?email_verified.orValue(true) == true", "")])(c);
        },
        &[],
    );
    check(
        "V-M10",
        |c: &mut Config| {
            username("", None, "claims.email")(c);
            extra(&[("example.org/v", "string(claims.email_verified)")])(c);
        },
        &[],
    );
    check(
        "V-M10",
        username("", None, "claims.email_verified ? claims.email : ''"),
        &[],
    );
    check("V-M10", username("", None, "claims.other.claims.email"), &[]);
    check("V-M10", username("email", Some(""), ""), &[]);
    // A username mapping with any error does not take part (upstream keeps only clean results).
    check(
        "V-M10",
        username("", Some("x:"), "claims.email"),
        &[
            r#"jwt[0].claimMappings.username.prefix: Invalid value: "x:": may not be specified when expression is set"#,
        ],
    );
    // An email_verified read inside an expression that fails to compile does not count.
    check(
        "V-M10",
        |c: &mut Config| {
            username("", None, "claims.email")(c);
            claim_rules(&[("", "", "claims.email_verified == user.x", "")])(c);
        },
        &[
            "jwt[0].claimValidationRules[0].expression: Invalid value: \"claims.email_verified == user.x\": compilation failed: ERROR: <input>:1:26: undeclared reference to 'user' (in container '')\n | claims.email_verified == user.x\n | .........................^",
            &refused,
        ],
    );
}
