//! Attacks on the Talos client: the attack steps as an attacker would take them against the
//! client's own connection code, and what must stop them. One file per attack.

mod impostor_node;
