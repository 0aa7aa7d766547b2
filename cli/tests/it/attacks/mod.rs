//! Attacks on the CLI that need no cluster. One file per attack.

mod operation_record_written_through_a_planted_symlink;
