//! Ichor identity as it ships, on the test kit's real node (`ichor_testkit::node`): kubelet,
//! containerd and runc, kube-proxy, controller-manager and scheduler beside etcd and the
//! kube-apiserver, all inside a network namespace the test creates. The chart is installed by the
//! real helm with the images `hack/images/build.sh` wrote, and the README walkthrough runs in
//! order against it ([`walkthrough`]). One node at a time (nextest's `node` group).

mod clients;
mod cluster;
mod faults;
mod site;
mod walkthrough;
