//! The test kit: what more than one crate's tests need to meet the real things this project
//! talks to. Each module starts or finds one real peer and stops it on drop.
//!
//! - [`consumers`]: where the test command put the real binaries (kube-apiserver, kubectl, etcd,
//!   the apiserver's validator, go-oidc), and the one rule for a missing one.
//! - [`control_plane`]: etcd and one or more kube-apiservers sharing it on 127.0.0.1.
//! - [`external_idp`]: a real external OpenID provider (npm `oidc-provider`) with static accounts.
//! - [`install`]: Ichor's CRDs and chart applied to a control plane, and kubeconfigs of its
//!   ServiceAccounts for components run as local processes.
//! - [`rbac`]: the rules a manifest grants a ServiceAccount against what its audit log shows it
//!   used (least privilege, measured).
//! - [`wait`]: the bounded poll loop.
#![forbid(unsafe_code)]

pub mod consumers;
pub mod control_plane;
pub mod external_idp;
pub mod install;
pub mod rbac;
pub mod wait;
