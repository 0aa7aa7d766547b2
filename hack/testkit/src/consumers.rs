//! Where the real consumers are. `hack/test.sh` builds or installs them under `$ICHOR_BUILD_DIR`
//! (default `.build` at the repository root): `hack/kube/build.sh` puts kube-apiserver, kubectl,
//! etcd, the apiserver's validator, helm and the node's kubelet, kube-proxy,
//! kube-controller-manager and kube-scheduler in `kube/current/`; `hack/node/build.sh` puts the
//! node's image archives in `images/` ([`images_dir`]); `hack/talos/build.sh` puts the real Talos
//! client, `ichor-talos-probe`, in `talos/current/` ([`require_talos_probe`]).
//!
//! A test that needs one is marked `#[ignore = "needs <consumer>: <the command that provides
//! it>"]`, so that a plain `cargo test` reports it as ignored rather than passed, and
//! `hack/test.sh` runs it with `cargo nextest run --run-ignored all`. The test calls [`require`]
//! (or [`require_path`]): when it runs and the consumer is missing it fails with a message naming
//! the command that builds it. `ICHOR_REQUIRE_CONSUMERS=0` turns that failure back into an early
//! return (the test then reports as passed without having run, so the test command never sets
//! it; `hack/test.sh` sets `ICHOR_REQUIRE_CONSUMERS=1`).

use std::path::{Path, PathBuf};

/// The repository's root (the test kit lives at `hack/testkit`): found from the running test's
/// package directory (`CARGO_MANIFEST_DIR` as cargo and nextest set it at run time), then from
/// the one this crate was compiled in. A target directory shared by two checkouts can keep the
/// compiled path of the other checkout, so the run-time one comes first.
pub fn repo_root() -> PathBuf {
    let running = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let compiled = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    running
        .iter()
        .chain([&compiled])
        .flat_map(|dir| dir.ancestors())
        .find(|dir| dir.join("hack/testkit/Cargo.toml").is_file())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `$ICHOR_BUILD_DIR`, or `.build` at the repository root.
pub fn build_dir() -> PathBuf {
    std::env::var_os("ICHOR_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".build"))
}

/// The directory `hack/kube/build.sh` builds into (`$ICHOR_BUILD_DIR/kube/current`).
pub fn kube_bin_dir() -> PathBuf {
    build_dir().join("kube").join("current")
}

/// The OCI image archives `hack/node/build.sh` builds (`$ICHOR_BUILD_DIR/images`): the pause
/// image of the node's pods and the node test's HTTP server.
pub fn images_dir() -> PathBuf {
    build_dir().join("images")
}

/// The directory `hack/talos/build.sh` builds into (`$ICHOR_BUILD_DIR/talos/current`).
pub fn talos_bin_dir() -> PathBuf {
    build_dir().join("talos").join("current")
}

/// The real Talos client: `hack/talos/probe` (`ichor-talos-probe`), built by
/// `hack/talos/build.sh` on `github.com/siderolabs/talos/pkg/machinery` — the client library,
/// configuration loader, validator and generator `talosctl` is built on. As [`require`]: when it
/// is missing, a failure naming `hack/talos/build.sh` (`None` under `ICHOR_REQUIRE_CONSUMERS=0`).
pub fn require_talos_probe() -> Option<PathBuf> {
    require_path(talos_bin_dir().join("ichor-talos-probe"), "hack/talos/build.sh")
}

/// The real binaries built from their modules by `hack/kube/build.sh`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeBinary {
    /// `k8s.io/kubernetes/cmd/kube-apiserver`.
    ApiServer,
    /// `k8s.io/kubernetes/cmd/kubectl`.
    Kubectl,
    /// `go.etcd.io/etcd/server/v3`.
    Etcd,
    /// `hack/kube/apiserver/validate`: the apiserver's own decoder and validator over a stream.
    AuthnValidate,
    /// `helm.sh/helm/v3/cmd/helm` (`hack/kube/helm`): the Helm client that installs and upgrades
    /// the chart.
    Helm,
    /// `k8s.io/kubernetes/cmd/kubelet`: the node agent of the test kit's node ([`crate::node`]).
    Kubelet,
    /// `k8s.io/kubernetes/cmd/kube-proxy`: the node's Service routing (iptables mode).
    KubeProxy,
    /// `k8s.io/kubernetes/cmd/kube-controller-manager`: the node's controllers (Deployments,
    /// ServiceAccounts, EndpointSlices, garbage collection).
    ControllerManager,
    /// `k8s.io/kubernetes/cmd/kube-scheduler`: binds the node's pods.
    Scheduler,
}

impl KubeBinary {
    /// The file name under [`kube_bin_dir`].
    pub fn file_name(self) -> &'static str {
        match self {
            Self::ApiServer => "kube-apiserver",
            Self::Kubectl => "kubectl",
            Self::Etcd => "etcd",
            Self::AuthnValidate => "authn-validate",
            Self::Helm => "helm",
            Self::Kubelet => "kubelet",
            Self::KubeProxy => "kube-proxy",
            Self::ControllerManager => "kube-controller-manager",
            Self::Scheduler => "kube-scheduler",
        }
    }

    /// Its path (which may not exist).
    pub fn path(self) -> PathBuf {
        kube_bin_dir().join(self.file_name())
    }
}

/// Whether a missing consumer fails the test: always, unless `ICHOR_REQUIRE_CONSUMERS=0`.
pub fn consumers_required() -> bool {
    std::env::var("ICHOR_REQUIRE_CONSUMERS").as_deref() != Ok("0")
}

/// The path of `binary` if it is there. When it is not: panics with the command that builds it
/// (`hack/kube/build.sh`), or, under `ICHOR_REQUIRE_CONSUMERS=0` only, prints why the calling
/// test returns early and returns `None`.
pub fn require(binary: KubeBinary) -> Option<PathBuf> {
    require_path(binary.path(), "hack/kube/build.sh")
}

/// As [`require`], for any file a test needs, with the command that provides it.
pub fn require_path(path: PathBuf, provided_by: &str) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path);
    }
    assert!(
        !consumers_required(),
        "{} is missing: run {provided_by} (or hack/test.sh) to provide it. The tests that need it \
         are #[ignore]d, so a plain `cargo test` does not run them; `cargo nextest run \
         --run-ignored all` does, and fails them until it is there",
        path.display()
    );
    eprintln!(
        "SKIPPED (ICHOR_REQUIRE_CONSUMERS=0): {} is missing (run {provided_by}, or hack/test.sh, \
         to provide it)",
        path.display()
    );
    None
}
