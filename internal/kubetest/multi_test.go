package kubetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// The tests start their own control planes; none needs the shared one.
func TestMain(m *testing.M) {
	EnterNetns()
	os.Exit(m.Run())
}

const multiNS = "multi"

// TestThreeClusters runs three control planes at once and checks what a
// multi-cluster test relies on: each binds and runs its own pods with IPs
// from its own CIDR, reachable in the namespace; none sees another's
// objects; one's apiserver can be down while the others serve, and after
// it is back its controllers and kwok go on.
func TestThreeClusters(t *testing.T) {
	start := time.Now()
	cs := StartClusters(t, 3, 1)
	t.Logf("3 control planes started in parallel in %v; RSS %s", time.Since(start).Round(100*time.Millisecond), rssReport(t, cs))

	for _, c := range cs {
		createReplicaSet(t, c, "web-"+c.Name)
	}
	for _, c := range cs {
		for _, ip := range runningPodIPs(t, c, 1) {
			assertPodIPIsOwn(t, c, cs, ip)
		}
		node, err := c.Client.CoreV1().Nodes().Get(context.Background(), "node-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if z, r := node.Labels["topology.kubernetes.io/zone"], node.Labels["topology.kubernetes.io/region"]; z != c.Name+"-zone-a" || r != "region-"+c.Name {
			t.Errorf("%s: node-0 zone %q region %q, want %s-zone-a region-%s", c.Name, z, r, c.Name, c.Name)
		}
	}
	for _, c := range cs {
		if got := replicaSetNames(t, c); got != "web-"+c.Name {
			t.Errorf("%s holds ReplicaSets [%s], want only its own web-%s", c.Name, got, c.Name)
		}
	}

	down := cs[1]
	stopAt := time.Now()
	if err := down.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s apiserver stopped in %v", down.Name, time.Since(stopAt).Round(10*time.Millisecond))
	// No outgoing connection may take the port while it is free.
	reserved, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_reserved_ports")
	if port := down.Config.Host[strings.LastIndex(down.Config.Host, ":")+1:]; !strings.Contains(","+strings.TrimSpace(string(reserved))+",", ","+port+",") {
		t.Errorf("apiserver port %s is not among the reserved ports %q", port, reserved)
	}
	if err := getReplicaSet(down, "web-"+down.Name); err == nil {
		t.Fatalf("%s: a client reached the apiserver while it was stopped", down.Name)
	}
	for _, c := range []*Cluster{cs[0], cs[2]} {
		if err := getReplicaSet(c, "web-"+c.Name); err != nil {
			t.Errorf("%s while %s is down: %v", c.Name, down.Name, err)
		}
	}
	if err := down.StopAPIServer(); err != nil {
		t.Errorf("stopping a stopped apiserver: %v", err)
	}
	startAt := time.Now()
	if err := down.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s apiserver ready again in %v", down.Name, time.Since(startAt).Round(10*time.Millisecond))
	if err := down.StartAPIServer(); err == nil {
		t.Error("StartAPIServer of a running apiserver: no error")
	}
	Eventually(t, 30*time.Second, down.Name+" answers the same client again", func() (bool, string) {
		err := getReplicaSet(down, "web-"+down.Name)
		return err == nil, fmt.Sprint(err)
	})
	// The data survived, and kube-controller-manager and kwok reconnected:
	// a second replica is created, bound and given an IP.
	scale(t, down, "web-"+down.Name, 2)
	for _, ip := range runningPodIPs(t, down, 2) {
		assertPodIPIsOwn(t, down, cs, ip)
	}
}

// TestStartClusterNodeLabels checks the default topology of a cluster's
// nodes (as the shared cluster's) and NodeLabels.
func TestStartClusterNodeLabels(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Name: "labels", Nodes: 3, PodCIDR: "10.250.0.0/16",
		NodeLabels: map[string]string{"sluice.io/rack": "r1"}})
	for i, zone := range []string{"zone-a", "zone-b", "zone-c"} {
		node, err := c.Client.CoreV1().Nodes().Get(context.Background(), fmt.Sprintf("node-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "region-1", "sluice.io/rack": "r1"}
		for k, v := range want {
			if node.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", node.Name, k, node.Labels[k], v)
			}
		}
	}
}

// TestClusterOptionsRefused checks that bad options get a clear error
// before anything starts.
func TestClusterOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		opts ClusterOptions
		want string
	}{
		{ClusterOptions{Name: "C_1", PodCIDR: "10.250.0.0/16"}, "name"},
		{ClusterOptions{Name: "c1", PodCIDR: "10.250.0.0"}, "pod CIDR"},
		{ClusterOptions{Name: "c1", PodCIDR: "127.0.0.0/8"}, "private IPv4"},
		{ClusterOptions{Name: "c1", PodCIDR: "10.250.1.0/16"}, "network address"},
		{ClusterOptions{Name: "c1", PodCIDR: "10.250.0.0/16", Nodes: -1}, "negative"},
		{ClusterOptions{Name: "c1", PodCIDR: "10.250.0.0/16", Zones: []string{"zone a"}}, "zone"},
		{ClusterOptions{Name: "c1", PodCIDR: "10.250.0.0/16", NodeLabels: map[string]string{"topology.kubernetes.io/zone": "x"}}, "use Region and Zones"},
	} {
		_, err := startCluster(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one about %q", tc.opts, err, tc.want)
		}
	}
}

// TestPodCIDROverlapRefused checks that a cluster whose pod CIDR overlaps
// a running one's is refused: both would hand out the same pod IPs.
func TestPodCIDROverlapRefused(t *testing.T) {
	running := &Cluster{Name: "a", PodCIDR: "10.250.0.0/16"}
	if err := claimPodCIDR(running); err != nil {
		t.Fatal(err)
	}
	defer releasePodCIDR(running)
	for _, cidr := range []string{"10.250.0.0/16", "10.250.7.0/24", "10.248.0.0/14"} {
		if err := claimPodCIDR(&Cluster{Name: "b", PodCIDR: cidr}); err == nil || !strings.Contains(err.Error(), "overlaps cluster a") {
			t.Errorf("%s beside 10.250.0.0/16: error %v, want an overlap", cidr, err)
		}
	}
	other := &Cluster{Name: "c", PodCIDR: "10.251.0.0/16"}
	if err := claimPodCIDR(other); err != nil {
		t.Errorf("10.251.0.0/16 beside 10.250.0.0/16: %v", err)
	}
	releasePodCIDR(other)
}

func createReplicaSet(t *testing.T, c *Cluster, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: multiNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// No scheduler runs: the pods are bound by nodeName.
				Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "web", Image: "web"}}},
			},
		},
	}
	if _, err := c.Client.AppsV1().ReplicaSets(multiNS).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
}

func scale(t *testing.T, c *Cluster, name string, replicas int32) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := c.Client.AppsV1().ReplicaSets(multiNS).Patch(context.Background(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
}

// runningPodIPs waits until c runs n pods in multiNS with IPs.
func runningPodIPs(t *testing.T, c *Cluster, n int) []string {
	t.Helper()
	var ips []string
	Eventually(t, 60*time.Second, fmt.Sprintf("%s runs %d pods with IPs", c.Name, n), func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(multiNS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ips = ips[:0]
		var seen []string
		for _, p := range pods.Items {
			seen = append(seen, fmt.Sprintf("%s %s %q", p.Name, p.Status.Phase, p.Status.PodIP))
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				ips = append(ips, p.Status.PodIP)
			}
		}
		return len(ips) == n && len(pods.Items) == n, strings.Join(seen, ", ")
	})
	return ips
}

// assertPodIPIsOwn checks that ip is in c's pod CIDR and no other's, and
// that a test can serve on it.
func assertPodIPIsOwn(t *testing.T, c *Cluster, all []*Cluster, ip string) {
	t.Helper()
	for _, o := range all {
		_, n, _ := net.ParseCIDR(o.PodCIDR)
		if in := n.Contains(net.ParseIP(ip)); in != (o == c) {
			t.Errorf("%s pod IP %s: in %s's %s = %v", c.Name, ip, o.Name, o.PodCIDR, in)
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Errorf("%s pod IP %s is not local in the namespace: %v", c.Name, ip, err)
		return
	}
	l.Close()
}

func replicaSetNames(t *testing.T, c *Cluster) string {
	t.Helper()
	list, err := c.Client.AppsV1().ReplicaSets("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	var names []string
	for _, rs := range list.Items {
		names = append(names, rs.Name)
	}
	return strings.Join(names, ",")
}

func getReplicaSet(c *Cluster, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Client.AppsV1().ReplicaSets(multiNS).Get(ctx, name, metav1.GetOptions{})
	return err
}

// rssReport sums the resident memory of each component over the clusters.
func rssReport(t *testing.T, cs []*Cluster) string {
	t.Helper()
	var parts []string
	total := 0
	for _, comp := range Components {
		sum := 0
		for _, c := range cs {
			sum += rssKiB(t, c, comp)
		}
		total += sum
		parts = append(parts, fmt.Sprintf("%s %d MiB", comp, sum/1024))
	}
	return fmt.Sprintf("%d MiB (%s)", total/1024, strings.Join(parts, ", "))
}

// rssKiB reads the resident memory of one component of c; one that is not
// running fails the test with the end of its log.
func rssKiB(t *testing.T, c *Cluster, comp string) int {
	t.Helper()
	pid, err := c.PID(comp)
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("%s %s (pid %d) is not running: %v\n%s", c.Name, comp, pid, err, testkit.LastLines(c.Log(comp), 30))
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kib
		}
	}
	return 0
}

// TestPortTakenKnowsABindCollision: launch starts a control plane again
// only when a component lost its port to another process, which the
// components (Go binaries) report as Go's listen error does.
func TestPortTakenKnowsABindCollision(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, collision := net.Listen("tcp", l.Addr().String())
	if collision == nil {
		t.Fatal("a second listen on a bound port succeeded")
	}
	if !portTaken(fmt.Errorf("run-controlplane.sh (cluster a): exit status 1\napiserver died\nE1206 %v", collision)) {
		t.Errorf("not retried: %v", collision)
	}
	if portTaken(fmt.Errorf("run-controlplane.sh (cluster a): exit status 1\netcd died\nno space left on device")) {
		t.Error("a start that failed for another reason is retried")
	}
}
