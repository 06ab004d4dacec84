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
package kubetest
