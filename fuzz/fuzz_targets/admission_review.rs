//! AdmissionReview request bodies (`reconcilers::admission::review::parse`), what the
//! kube-apiserver (or anything that reaches the webhook port) posts to the controller's
//! validating webhooks.
//!
//! Properties: no panic; an accepted review has a uid, and its user accessors are total.
#![no_main]

use ichor_reconcilers::admission::review;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(request) = review::parse(data) else {
        return;
    };
    assert!(!request.uid.is_empty(), "an accepted review has a uid");
    let _ = (request.username(), request.groups());
});
