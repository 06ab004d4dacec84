// Package clusters has one job: the clusters sluice runs rollouts in, their
// connections, labels and reachability.
//
// Load gathers them: the home cluster (the one sluice runs against: its
// Lease and state live there), each `--cluster NAME=KUBECONFIG[,labels]`
// entry (ParseFlag) and each cluster Secret in sluice's namespace. One
// apiserver is one cluster: an entry that points at the home apiserver
// names and labels the home cluster instead of adding a second one. Health
// probes every cluster's /readyz and says which are unreachable, since when
// and why, so that a cluster that cannot be reached holds its own rollouts
// and no one else's.
package clusters
