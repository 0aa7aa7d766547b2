//! AdmissionReview request bodies (`reconcilers::admission::review::parse`), what the
//! kube-apiserver (or anything that reaches the webhook port) posts to the controller's
//! validating webhooks.
//!
//! Properties: no panic; an accepted review has a uid, and its user accessors are total.

use ichor_reconcilers::admission::review;

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Ok(request) = review::parse(data) else {
        return;
    };
    assert!(!request.uid.is_empty(), "an accepted review has a uid");
    let _ = (request.username(), request.groups());
}
