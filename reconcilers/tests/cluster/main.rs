//! `ichor-controller` against a real control plane: etcd and kube-apiservers built from their Go
//! modules (`hack/kube/build.sh`, started by `ichor_testkit::control_plane`), Ichor's CRDs and
//! chart applied as `helm install` would (`ichor_testkit::install`), and each controller replica
//! a local process that authenticates as the chart's ServiceAccount, so the apiserver decides
//! with the chart's own RBAC. Covers the CRDs' rules as the apiserver enforces them, leader
//! election on a real Lease, failover after `kill -9`, watches resumed across an apiserver
//! restart, and the chart's RBAC measured against the audit log. Every test is
//! `#[ignore = "needs the control plane: hack/kube/build.sh"]`: `cargo nextest run
//! --run-ignored all` (as `hack/test.sh` runs it) runs them, and fails one whose binaries are
//! missing with the command that builds them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr, missing_docs)]

mod attacks;
mod controller;
mod crds;
mod credentials;
mod credentials_dedication;
mod credentials_migration;
mod credentials_migration_end;
mod prerequisites;
mod replicas;
mod rollout;
mod webhooks;
