//! The test kit: what more than one crate's tests need to meet the real things this project
//! talks to. Each module starts or finds one real peer and stops it on drop.
//!
//! - [`consumers`]: where the test command put the real binaries (kube-apiserver, kubectl, etcd,
//!   the apiserver's validator, helm, go-oidc), and the one rule for a missing one.
//! - [`control_plane`]: etcd and one or more kube-apiservers sharing it on 127.0.0.1 (or on
//!   127.0.0.1, .2, .3, … at one port).
//! - [`external_idp`]: a real external OpenID provider (npm `oidc-provider`) with static accounts.
//! - [`helm`]: the real helm client against a control plane, with a home of the test's own.
//! - [`images`]: the OCI image archives `hack/images/build.sh` writes, opened for assertions,
//!   and the `Dockerfile`'s stages they must equal.
//! - [`install`]: Ichor's CRDs and chart applied to a control plane, and kubeconfigs of its
//!   ServiceAccounts for components run as local processes; an `IchorUser` manifest, and the
//!   wait for the webhooks' `caBundle`s the controller writes.
//! - [`jwt`]: a JWT's header and claims, read without verification for assertions.
//! - [`load`] (feature `load`): open-loop load for the benchmarks, and its percentiles.
//! - [`node`]: a real single-node cluster (control plane, containerd, kubelet, kube-proxy) in a
//!   network namespace the test creates, running pods from image archives built here.
//! - [`ports`]: free TCP ports below the ephemeral range, each reserved (a lock file) for the
//!   life of the test process that asked, so parallel test processes never share one.
//! - [`pki`]: the one test CA, its serving and client certificates, a rustls server over one.
//! - [`rbac`]: the rules a manifest grants a ServiceAccount against what its audit log shows it
//!   used (least privilege, measured).
//! - [`talos`] (feature `talos`): a fake Talos API endpoint (apid over mutual TLS) with fake
//!   nodes: their machine configurations, a record of every call, injected failures, and a hook
//!   after each apply (a real kube-apiserver restart).
//! - [`wait`]: the bounded poll loop.
//! - [`issuer`] (feature `issuer`): the issuer in process over a memory store and a manual
//!   clock, signing-key fixtures, the sign-in driver, HTTPS on loopback. Crates that do not test
//!   the issuer or its clients leave the feature off and do not link the issuer.
#![forbid(unsafe_code)]

pub mod consumers;
pub mod control_plane;
pub mod external_idp;
pub mod helm;
pub mod images;
pub mod install;
#[cfg(feature = "issuer")]
pub mod issuer;
pub mod jwt;
#[cfg(feature = "load")]
pub mod load;
pub mod node;
pub mod pki;
pub mod ports;
pub mod rbac;
#[cfg(feature = "talos")]
pub mod talos;
pub mod wait;
