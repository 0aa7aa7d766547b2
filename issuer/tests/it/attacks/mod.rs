//! Attacks on the issuer, one file per attack, each written from the attack's steps: the test
//! runs the attack and asserts that it fails.

mod cancelled_password_change_flood;
mod composed;
mod dead_refresh_token_flooding_revoke;
mod disabled_admin_restores_itself;
mod external_browser_token_as_kubectl_credential;
mod external_callers_share_the_garbage_place;
mod external_slow_jwks_with_garbage_kid;
mod forged_forwarded_for;
mod markup_through_the_sign_in_page;
mod named_account_lockout;
mod one_account_fills_the_password_gate;
mod one_account_rewriting_its_credentials_flat_out;
mod one_account_rotating_its_sessions_flat_out;
mod operator_demotes_an_admin_to_take_its_name;
mod operator_takes_over_an_admin;
mod password_change_guessing;
mod shared_address_garbage;
mod stolen_device_cookie_after_a_password_reset;
mod stolen_refresh_token_across_a_disable;
mod stolen_session_and_password_cannot_lock_the_owner_out;
