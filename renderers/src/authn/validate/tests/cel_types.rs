//! The CEL type errors of claim and user rules, with cel-go's texts.

use super::*;

/// Type errors cel-go finds, with its texts (checked against the kube-apiserver's validator).
#[test]
fn cel_type_errors_as_the_kube_apiserver_reports_them() {
    let p = "jwt[0].userValidationRules[0].expression";
    check(
        "V-V4",
        user_rules(&["user.username"]),
        &[&format!(
            r#"{p}: Invalid value: "user.username": must evaluate to bool"#
        )],
    );
    check(
        "V-V3",
        user_rules(&["user.foo == 1"]),
        &[&format!(
            "{p}: Invalid value: \"user.foo == 1\": compilation failed: ERROR: <input>:1:5: undefined field 'foo'\n | user.foo == 1\n | ....^"
        )],
    );
    let r = "jwt[0].claimValidationRules[0].expression";
    check(
        "V-R8",
        claim_rules(&[("", "", "claims.sub", "")]),
        &[&format!(
            r#"{r}: Invalid value: "claims.sub": must evaluate to bool"#
        )],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "1 + 'a' == 2", "")]),
        &[&format!(
            "{r}: Invalid value: \"1 + 'a' == 2\": compilation failed: ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, string)'\n | 1 + 'a' == 2\n | ..^"
        )],
    );
    check(
        "V-R7",
        claim_rules(&[("", "", "size(claims.groups) > 0", "")]),
        &[],
    );
}
