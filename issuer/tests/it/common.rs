//! What the in-process tests share: the issuer in process over a memory store, a manual clock
//! and keys made by the controller's own timeline, with its request helpers, all from the test
//! kit (`ichor_testkit::issuer`), under the names the tests use.

pub use ichor_testkit::issuer::{
    clock::ManualClock,
    harness::*,
    keys::{first_document, realize, timeline_settings},
    store::MemoryStore,
};
pub use ichor_testkit::jwt::{claims, header as jose_header};
