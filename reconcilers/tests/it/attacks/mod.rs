//! Attacks on the controller that need no cluster: the attack steps as an attacker would take
//! them against the controller's own code paths, and what must stop them. One file per attack.

mod compromised_issuer_deletes_admins_as_the_controller_manager;
mod control_characters_in_user_texts;
mod demoted_admin_re_promotes_itself_within_the_cache_lag;
mod disabled_admin_restores_itself_with_kubectl;
mod finalizer_keeps_a_deleted_admin_counted;
mod new_users_password_taken_for_an_orphan;
mod operation_shapes_that_skip_the_start_check;
mod operator_changes_the_session_policy;
mod operator_demotes_an_admin_to_take_its_name;
mod operator_has_the_garbage_collector_delete_an_admin;
mod operator_re_enables_a_disabled_admin;
mod operator_repoints_everyones_kubeconfig;
mod operator_resumes_a_held_destructive_operation;
mod secret_material_in_journal_metadata;
mod stolen_sessions_brought_back_by_kubectl;
