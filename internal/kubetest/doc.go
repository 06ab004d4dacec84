// Package kubetest starts a real Kubernetes control plane for tests:
// etcd, kube-apiserver, kube-controller-manager (the real ReplicaSet and
// EndpointSlice controllers) and kwok as the kubelet stand-in, from the
// binaries hack/kube/build-binaries.sh builds into a cache directory.
//
// kwok gives bound pods IPs from PodCIDR. The apiserver refuses loopback
// addresses in EndpointSlices, so PodCIDR is a private range; Main runs
// the test binary inside a network namespace of its own (unshare --net)
// where that range is local, so a test can serve a real backend on a pod's
// IP and nothing leaves the namespace.
//
// A multi-cluster test starts more control planes of its own beside the
// shared one (StartCluster, StartClusters): each has its own ports, work
// directory and pod CIDR, made local in the same namespace, and stops when
// the test ends. StopAPIServer and StartAPIServer take one apiserver away
// and bring it back on the same port and data, as an outage its clients
// recover from.
package kubetest
