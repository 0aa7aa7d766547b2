//! `UserService` (gRPC and gRPC-web, `proto/ichor/v1alpha1/user.proto`): Ichor's users, their
//! passwords and sessions, and the caller's kubeconfig.
//!
//! - [`service`]: [`UserApi`], the service, generic over the store backend ([`UserBackend`]),
//!   the authorization backend ([`AccessReview`]) and the bearer-token verifier
//!   ([`BearerVerifier`]); [`grpc_service`] wraps it for a tonic server, [`grpc_router`] for the issuer's listener
//!   (gRPC and gRPC-web);
//! - [`auth`]: the bearer token, the caller ([`Caller`]) and the session cache;
//! - [`access`]: the RBAC question of each call and the two review backends (in process,
//!   `SubjectAccessReview`);
//! - [`backend`]: user writes ([`UserBackend`], implemented by the local store);
//!   [`kube_backend`]: the same writes in a cluster, made as the caller (impersonation);
//! - [`factors`]: second factors as the API shows and changes them (pure);
//! - [`validate`]: request validation; [`kubeconfig`]: the kubeconfig renderer; [`error`]: the
//!   refusals and their status codes; [`proto`]: the generated code.
//!
//! # Per call
//! 1. The bearer token (`authorization: Bearer …`, audience `ichor-ui`) is verified; its user is
//!    re-read through the store cache (≤ 10 s), so a disable or a role change takes effect within
//!    10 s, and read afresh for a call that changes a user (create, update, delete, set password,
//!    revoke sessions, a change of one's own second factors), where it takes effect at once;
//!    roles come from the `IchorUser`, never from the token. A missing, disabled or revoked
//!    (`iat < notBefore`) user is `Unauthenticated`.
//! 2. A user whose credentials say `mustChange` may call only `WhoAmI` and `ChangeOwnPassword`
//!    (`PermissionDenied` "change your password first").
//! 3. The request is validated whole (`InvalidArgument` naming the field).
//! 4. RBAC is asked ([`access`]); then, for Ichor's own users, the grant rule and the act-on rule
//!    (setting a password, ending sessions, re-enabling, demoting, disabling or deleting a user
//!    needs the right to grant each of its roles), and for everyone the last-enabled-admin rule
//!    (`ichor_renderers::auth::roles`, the messages the admission webhook prints too).
//! 5. Writes: the user object, then the credentials entry; a create whose credentials write
//!    fails removes the user object again, so it leaves neither behind.

pub mod access;
pub mod auth;
pub mod backend;
pub mod error;
pub mod factors;
pub mod kube_backend;
pub mod kubeconfig;
pub mod proto;
pub mod service;
pub mod validate;

pub use access::{AccessReview, AccessReviewError, KubeAccessReview, LocalAccessReview};
pub use auth::{BearerClaims, BearerError, BearerVerifier, Caller, Clock, SystemClock};
pub use backend::{Created, UserBackend};
pub use error::ApiError;
pub use service::{
    ApiConfig, ClusterInfo, MAX_MESSAGE_BYTES, UNTRUSTED_ISSUER, UserApi, grpc_router, grpc_service,
};
