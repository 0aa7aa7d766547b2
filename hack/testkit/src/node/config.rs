//! The configuration files of a node's components, written into its directory: containerd's
//! (everything under the node's directory, the CRI with the local pause image), the CNI network
//! (bridge, host-local, portmap) and the kubelet's `KubeletConfiguration`.

use std::net::Ipv4Addr;
use std::path::Path;

/// The node's name (`--hostname-override`): no name resolution is needed for it.
pub const NODE_NAME: &str = "ichor-node";
/// The node's address on its bridge `node0` (a /24 of its own).
pub const NODE_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
/// The pods' addresses: the CNI bridge `cni0`'s subnet.
pub const POD_SUBNET: &str = "10.201.0.0/24";
/// The cluster CIDR the controller-manager and kube-proxy are told (it holds [`POD_SUBNET`]).
pub const CLUSTER_CIDR: &str = "10.201.0.0/16";
/// The Service CIDR.
pub const SERVICE_CIDR: &str = "10.202.0.0/24";
/// The `kubernetes` Service's ClusterIP (the Service CIDR's first address).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 202, 0, 1);
/// The pause image `hack/node/build.sh` builds: the pods' sandbox.
pub const PAUSE_IMAGE: &str = "ichor.local/pause:3.10.2";
/// Where Debian's containernetworking-plugins are.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// containerd's `config.toml`: root, state, socket, runc's root, the CNI configuration and the
/// pods' network namespaces all under `dir`; the CRI's sandbox image the local pause image;
/// `restrict_oom_score_adj` because the session cannot lower an `oom_score_adj`.
pub fn containerd(dir: &Path, socket: &Path) -> String {
    let d = dir.display();
    format!(
        r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "{socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  disable_hugetlb_controller = true
  tolerate_missing_hugetlb_controller = true

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{d}/cni/net.d"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{d}/runc"
        SystemdCgroup = false
"#,
        socket = socket.display(),
    )
}

/// The CNI network `name`: a bridge `cni0` that is the pods' gateway, host-local addresses from
/// [`POD_SUBNET`] (its state under `dir`, not in `/var/lib/cni`), and portmap.
pub fn cni(dir: &Path, name: &str) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": dir.join("cni/ipam"),
                    "ranges": [[{ "subnet": POD_SUBNET }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                },
            },
            { "type": "portmap", "capabilities": { "portMappings": true } },
        ],
    })
    .to_string()
}

/// The kubelet's `KubeletConfiguration`: cgroup v1 allowed, cgroupfs under the node's own
/// `cgroup_root` (which must exist in every hierarchy), swap tolerated, the
/// node's containerd, serving on the node's address, healthz on loopback, no read-only port,
/// no node-allocatable enforcement, pod logs and the FlexVolume plugin directory under `dir`, clients authenticated by the control
/// plane's CA and authorized by the apiserver, no DNS (`resolvConf: ""`), eviction and image
/// garbage collection out of the way of a test machine's disk.
pub fn kubelet(dir: &Path, socket: &Path, ca: &Path, cgroup_root: &str, healthz_port: u16) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
failSwapOn: false
containerRuntimeEndpoint: unix://{socket}
address: {NODE_ADDRESS}
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
readOnlyPort: 0
enforceNodeAllocatable: []
podLogsDir: {d}/pod-logs
volumePluginDir: {d}/kubelet-volume-plugins
resolvConf: ""
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
maxPods: 30
"#,
        socket = socket.display(),
        d = dir.display(),
        ca = ca.display(),
    )
}
