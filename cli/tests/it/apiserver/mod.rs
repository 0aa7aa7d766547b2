//! The trust path against a real control plane: etcd and kube-apiservers built from their Go
//! modules (`hack/kube/build.sh`) and started on loopback by `ichor_testkit::control_plane`,
//! the real kubectl, and the real `ichor` binary. Skipped with a message when the binaries are
//! missing, unless `ICHOR_REQUIRE_CONSUMERS=1` (as `hack/test.sh` sets it).
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
