//! `jwt[].userValidationRules` and `anonymous`.

use super::*;

#[test]
fn user_validation_rules() {
    let p = "jwt[0].userValidationRules";
    check("V-V1", user_rules(&["!user.username.startsWith('system:')"]), &[]);
    check(
        "V-V1",
        user_rules(&[""]),
        &[&format!("{p}[0].expression: Required value")],
    );
    check(
        "V-V2",
        user_rules(&[
            "!user.username.startsWith('system:')",
            "!user.groups.exists(g, g.startsWith('system:'))",
        ]),
        &[],
    );
    check(
        "V-V2",
        user_rules(&["user.uid != ''", "user.uid != ''"]),
        &[&format!(
            r#"{p}[1].expression: Duplicate value: "user.uid != ''""#
        )],
    );
    check(
        "V-V3",
        user_rules(&["claims.sub != ''"]),
        &[&format!(
            "{p}[0].expression: Invalid value: \"claims.sub != ''\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'claims' (in container '')\n | claims.sub != ''\n | ^"
        )],
    );
    check("V-V4", user_rules(&["true"]), &[]);
    check(
        "V-V4",
        user_rules(&["'x'"]),
        &[&format!(
            r#"{p}[0].expression: Invalid value: "'x'": must evaluate to bool"#
        )],
    );
}

#[test]
fn anonymous_rules() {
    check(
        "V-N1",
        |c: &mut Config| c.anonymous = anonymous(true, &["/livez"]),
        &[],
    );
    check("V-N1", |c: &mut Config| c.anonymous = anonymous(false, &[]), &[]);
    check(
        "V-N1",
        |c: &mut Config| c.anonymous = anonymous(false, &["/livez", "/a<b"]),
        &[
            r#"anonymous.conditions: Invalid value: [{"Path":"/livez"},{"Path":"/a\u003cb"}]: enabled should be set to true when conditions are defined"#,
        ],
    );
}
