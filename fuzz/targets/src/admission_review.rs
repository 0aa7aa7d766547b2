//! AdmissionReview request bodies (`reconcilers::admission::review::parse`), what the
//! kube-apiserver (or anything that reaches the webhook port) posts to the controller's
//! validating webhooks.
//!
//! Properties: no panic; an accepted review has a uid, its accessors are total, and both
//! answers to it (allow, deny) are v1 reviews that echo the uid.

use ichor_controller::admission::review::{self, Verdict};

/// One input of the target: returns normally or panics on a broken property.
pub fn run(data: &[u8]) {
    let Ok(request) = review::parse(data) else {
        return;
    };
    assert!(!request.uid.is_empty(), "an accepted review has a uid");
    let _ = (
        review::username(&request),
        review::groups(&request),
        review::namespace(&request),
        review::operation_name(&request.operation),
    );
    for verdict in [Verdict::Allow, Verdict::deny("denied")] {
        let answer = review::answer(&request, verdict).expect("an answer serializes");
        assert_eq!(answer["apiVersion"], review::API_VERSION, "the answer is v1");
        assert_eq!(
            answer["response"]["uid"],
            request.uid.as_str(),
            "the answer echoes the uid"
        );
    }
}
