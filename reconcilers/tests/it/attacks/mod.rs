//! Attacks on the controller that need no cluster: the attack steps as an attacker would take
//! them against the controller's own code paths, and what must stop them. One file per attack.

mod new_users_password_taken_for_an_orphan;
mod secret_material_in_journal_metadata;
