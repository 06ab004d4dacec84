package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterOptions describe one of several control planes a test runs side
// by side (StartCluster).
type ClusterOptions struct {
	// Name names the cluster (a DNS label: c1, east...) in its work
	// directory and in errors.
	Name string
	// Nodes is how many kwok nodes it gets (type=kwok, node-0...).
	Nodes int
	// PodCIDR is the private IPv4 range kwok gives its pods' IPs from. It
	// is made local in the test's network namespace, so a test can serve a
	// backend on a pod's IP; clusters running at once need ranges that do
	// not overlap (the shared cluster has PodCIDR).
	PodCIDR string
	// Region and Zones are the nodes' topology.kubernetes.io/region and
	// topology.kubernetes.io/zone labels, node i in Zones[i%len(Zones)]:
	// by default region-1 and zone-a, zone-b, zone-c, as the shared cluster.
	Region string
	Zones  []string
	// NodeLabels are more labels for every node.
	NodeLabels map[string]string
}

// StartCluster starts a control plane of its own for t (etcd,
// kube-apiserver, kube-controller-manager and kwok on free ports, in a
// directory of its own) and stops it when t ends. Several can run at once
// beside the shared one. The test binary must run inside EnterNetns.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	c, err := startCluster(opts)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// StartClusters starts n control planes in parallel for t, each with
// nodes kwok nodes: cluster i (from 1) is named ci, has pod CIDR
// 10.(244+i).0.0/16 (10.244/16 stays the shared cluster's), region
// region-ci and zones ci-zone-a|b|c, so its pods' IPs and its nodes'
// localities tell the clusters apart. They stop when t ends.
func StartClusters(t testing.TB, n, nodes int) []*Cluster {
	t.Helper()
	if n < 1 || 244+n > 255 {
		t.Fatalf("kubetest: StartClusters: n = %d, want 1..11", n)
	}
	clusters := make([]*Cluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("c%d", i+1)
		opts := ClusterOptions{
			Name: name, Nodes: nodes, PodCIDR: fmt.Sprintf("10.%d.0.0/16", 245+i),
			Region: "region-" + name, Zones: []string{name + "-zone-a", name + "-zone-b", name + "-zone-c"},
		}
		wg.Go(func() { clusters[i], errs[i] = startCluster(opts) })
	}
	wg.Wait()
	for _, c := range clusters {
		if c != nil {
			t.Cleanup(c.Stop)
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
	}
	return clusters
}

// StartWith starts a control plane of opts outside a test (e2e/scale's
// run beside Argo Rollouts' controller), with extraKCMArgs added to
// kube-controller-manager's flags (space-separated). The caller must be
// inside EnterNetns and must Stop it.
func StartWith(opts ClusterOptions, extraKCMArgs string) (*Cluster, error) {
	if os.Getenv(inNetnsEnv) == "" {
		// Outside, the pod CIDR's route would go into the host's table.
		return nil, fmt.Errorf("cluster %q: not inside kubetest's network namespace; call kubetest.EnterNetns (or Main) from TestMain", opts.Name)
	}
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", opts.Name, err)
	}
	return launch(opts.withDefaults(), extraKCMArgs)
}

func startCluster(opts ClusterOptions) (*Cluster, error) { return StartWith(opts, "") }

// reservedNodeLabels are set from the other options.
var reservedNodeLabels = []string{"type", "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region"}

func (o ClusterOptions) check() error {
	if errs := validation.IsDNS1123Label(o.Name); len(errs) > 0 {
		return fmt.Errorf("name: %s", strings.Join(errs, "; "))
	}
	if o.Nodes < 0 {
		return fmt.Errorf("nodes: %d is negative", o.Nodes)
	}
	ip, ipnet, err := net.ParseCIDR(o.PodCIDR)
	if err != nil {
		return fmt.Errorf("pod CIDR: %w", err)
	}
	// The apiserver refuses loopback and link-local endpoint addresses.
	if ip.To4() == nil || !ip.IsPrivate() || !ip.Equal(ipnet.IP) {
		return fmt.Errorf("pod CIDR %s: want a private IPv4 network address such as 10.245.0.0/16", o.PodCIDR)
	}
	values := append([]string{o.Region}, o.Zones...)
	for _, v := range values {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("region or zone %q: %s", v, strings.Join(errs, "; "))
		}
	}
	for k, v := range o.NodeLabels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return fmt.Errorf("node label %s=%s: %s", k, v, strings.Join(errs, "; "))
		}
		for _, r := range reservedNodeLabels {
			if k == r {
				return fmt.Errorf("node label %s is set by kubetest (use Region and Zones)", k)
			}
		}
	}
	return nil
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	if o.Region == "" {
		o.Region = "region-1"
	}
	if len(o.Zones) == 0 {
		o.Zones = []string{"zone-a", "zone-b", "zone-c"}
	}
	return o
}

// nodeLabelsJSON renders labels as JSON object members for
// run-controlplane.sh's NODE_LABELS.
func nodeLabelsJSON(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	members := make([]string, len(keys))
	for i, k := range keys {
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(labels[k])
		members[i] = string(kj) + ": " + string(vj)
	}
	return strings.Join(members, ", ")
}

var (
	cidrsMu sync.Mutex
	cidrs   = map[*Cluster]*net.IPNet{} // pod CIDRs of the running clusters
)

// claimPodCIDR reserves c's pod CIDR while it runs, so two clusters never
// hand out the same pod IPs in one namespace (a backend served on one
// would answer for both), and makes it local there.
func claimPodCIDR(c *Cluster) error {
	_, ipnet, err := net.ParseCIDR(c.PodCIDR)
	if err != nil {
		return err
	}
	cidrsMu.Lock()
	defer cidrsMu.Unlock()
	for other, n := range cidrs {
		if n.Contains(ipnet.IP) || ipnet.Contains(n.IP) {
			return fmt.Errorf("pod CIDR %s overlaps cluster %s's %s", c.PodCIDR, other.Name, n)
		}
	}
	if os.Getenv(inNetnsEnv) != "" {
		// replace: the namespace may have the route already (PodCIDR, or a
		// cluster that ran before with the same range).
		if out, err := exec.Command("ip", "route", "replace", "local", ipnet.String(), "dev", "lo").CombinedOutput(); err != nil {
			return fmt.Errorf("route %s to loopback: %v: %s", ipnet, err, out)
		}
	}
	cidrs[c] = ipnet
	return nil
}

func releasePodCIDR(c *Cluster) {
	cidrsMu.Lock()
	defer cidrsMu.Unlock()
	delete(cidrs, c)
}

// StopAPIServer kills c's kube-apiserver alone, as an outage: every
// client of c (the test's, kube-controller-manager, kwok) sees its
// connections refused until StartAPIServer. etcd keeps the data. It
// returns once the process is gone; stopping a stopped one does nothing.
func (c *Cluster) StopAPIServer() error {
	c.apiserverMu.Lock()
	defer c.apiserverMu.Unlock()
	hack, err := hackDir()
	if err != nil {
		return err
	}
	if err := reserveAPIServerPort(c); err != nil {
		return fmt.Errorf("stop apiserver of %s: %w", c.Name, err)
	}
	// KILL: on TERM, with kube-controller-manager's and kwok's watches
	// open, it drains for over 10 s; an outage needs no drain.
	cmd := exec.Command(filepath.Join(hack, "stop-controlplane.sh"), c.Dir, "apiserver")
	cmd.Env = append(os.Environ(), "STOP_SIGNAL=KILL")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("stop apiserver of %s: %v: %s", c.Name, err, out)
	}
	return nil
}

// StartAPIServer starts c's kube-apiserver again after StopAPIServer, on
// the same port with the same certificates and data, and returns once it
// is ready: clients reconnect to it as they would after a restart.
func (c *Cluster) StartAPIServer() error {
	c.apiserverMu.Lock()
	defer c.apiserverMu.Unlock()
	if _, err := os.Stat(filepath.Join(c.Dir, "apiserver.pid")); err == nil {
		return fmt.Errorf("start apiserver of %s: it is running", c.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(c.Dir, "start-apiserver.sh"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("start apiserver of %s: %v: %s", c.Name, err, out.String())
	}
	return nil
}

var reservedPortsMu sync.Mutex

// reserveAPIServerPort keeps c's apiserver port out of the namespace's
// ephemeral ports while the apiserver is down, so that no outgoing
// connection takes it and StartAPIServer can listen on it again. The
// setting is the namespace's own; outside it nothing is changed.
func reserveAPIServerPort(c *Cluster) error {
	if os.Getenv(inNetnsEnv) == "" {
		return nil
	}
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return err
	}
	const sysctl = "/proc/sys/net/ipv4/ip_local_reserved_ports"
	reservedPortsMu.Lock()
	defer reservedPortsMu.Unlock()
	old, err := os.ReadFile(sysctl)
	if err != nil {
		return err
	}
	ports := strings.TrimSpace(string(old))
	if ports != "" {
		ports += ","
	}
	return os.WriteFile(sysctl, []byte(ports+u.Port()), 0o644)
}
