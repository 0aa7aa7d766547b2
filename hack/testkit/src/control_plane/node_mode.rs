//! The control plane of a node ([`crate::node`]): one kube-apiserver on the node's address, as
//! a cluster's runs, instead of the loopback-only test control plane.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

/// The addresses of a node's cluster that its kube-apiserver must know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeNetwork {
    /// The node's address: the apiserver binds and advertises it (the `kubernetes` Service's
    /// endpoint), and its serving certificate names it.
    pub address: Ipv4Addr,
    /// The Service CIDR (`--service-cluster-ip-range`).
    pub service_cidr: String,
    /// The `kubernetes` Service's ClusterIP (the CIDR's first address), also in the serving
    /// certificate: pods reach the apiserver there.
    pub service_ip: Ipv4Addr,
}

impl NodeNetwork {
    /// The IP addresses the serving certificate names besides loopback.
    pub(super) fn serving_ips(&self) -> [IpAddr; 2] {
        [self.address.into(), self.service_ip.into()]
    }

    /// Turns the loopback control plane's apiserver flags into a node's: ServiceAccount
    /// admission on (pods get tokens), the lease endpoint reconciler (the `kubernetes` Service
    /// gets the node's address as its endpoint), the node's Service CIDR, the kubelet reached on
    /// its InternalIP (no name resolution in the node) with the admin's client certificate (for
    /// `kubectl logs` and `exec`). On SIGTERM it closes its connections two seconds after the
    /// last short request instead of waiting up to a minute for the node's watches (the
    /// kubelet's, kube-proxy's, the controllers'), so a restart does not run into the test
    /// kit's 30-second stop bound.
    pub(super) fn adapt_args(&self, args: &mut Vec<String>, root: &Path) {
        args.retain(|a| {
            a != "--disable-admission-plugins=ServiceAccount"
                && a != "--endpoint-reconciler-type=none"
                && !a.starts_with("--service-cluster-ip-range=")
        });
        args.extend([
            "--endpoint-reconciler-type=lease".to_owned(),
            format!("--service-cluster-ip-range={}", self.service_cidr),
            "--kubelet-preferred-address-types=InternalIP".to_owned(),
            "--shutdown-send-retry-after=true".to_owned(),
            format!(
                "--kubelet-client-certificate={}",
                root.join("admin.crt").display()
            ),
            format!("--kubelet-client-key={}", root.join("admin.key").display()),
        ]);
    }
}
