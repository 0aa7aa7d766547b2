//! ichor
fn main() {}
