//! The trust path against a real control plane: etcd and kube-apiservers built from their Go
//! modules (`hack/kube/build.sh`) and started on loopback by `ichor_testkit::control_plane`,
//! the real kubectl, and the real `ichor` binary. Every test is `#[ignore = "needs the control
//! plane: hack/kube/build.sh"]` (some need helm or oidc-provider too): `cargo nextest run
//! --run-ignored all` (as `hack/test.sh` runs it) runs them, and fails one whose binaries are
//! missing with the command that builds them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr, missing_docs)]

mod goldens;
mod kubectl;
mod site;

mod attacks;

mod config_apply;
mod externals;
mod init;
mod lifecycle;
mod reload;
mod rotation;
mod second_factor;
