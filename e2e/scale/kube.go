package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// KubeConfig is the Kubernetes mode of the benchmark: the informer memory
// of one `sluice run --kubernetes` at N one-replica rollouts on the test
// control plane (internal/kubetest: kube-apiserver, kube-controller-manager,
// etcd, kwok), then what foreign objects cost it.
type KubeConfig struct {
	Rollouts, Namespaces, Nodes int
	// ForeignPods and ForeignReplicaSets are created, unlabelled, in a
	// namespace of their own once every rollout is Healthy.
	ForeignPods, ForeignReplicaSets int
	// KCMArgs are extra kube-controller-manager flags (its client QPS
	// bounds how fast the ReplicaSet controller creates pods).
	KCMArgs string
	// Clusters above 1 runs RunKubeClusters: that many control planes,
	// every rollout across all of them, sluice's state in StateStore.
	Clusters   int
	StateStore string
	Sluice     string
	Dir        string
	DaemonArgs []string
	Log        io.Writer
}

// KubeMemory is one reading of the daemon's memory.
type KubeMemory struct {
	RSSBytes int64
	// PeakRSSBytes is VmHWM at the reading: the daemon's peak RSS since
	// it started (or since the last reset, in the run across clusters).
	PeakRSSBytes    int64
	HeapInuseBytes  float64 // go_memstats_heap_inuse_bytes as found
	HeapAfterGC     float64 // the same right after a forced GC (pprof ?gc=1)
	Goroutines      float64
	HeapProfilePath string // the heap profile of that GC, for go tool pprof
}

// KubeObjects counts, from the apiserver, what sluice's informers hold:
// its ReplicaSets and Pods (label-selected), the Nodes, every Pod (the
// binder's cache) and the SluiceRollout records.
type KubeObjects struct {
	SluiceReplicaSets, SluicePods, RunningSluicePods int
	AllPods, AllReplicaSets, Nodes, SluiceRollouts   int
}

// KubeResult is what RunKube measured.
type KubeResult struct {
	Rollouts, Namespaces, Nodes      int
	LoadAverageStart, LoadAverageEnd string
	KCMArgs                          string
	// HealthySeconds: from starting sluice until every rollout is Healthy
	// and every one of its pods Running.
	HealthySeconds float64
	// LoadCPUSeconds is sluice's CPU over HealthySeconds;
	// PlaneLoadCPUSeconds its control plane's, by component
	// (kubetest.Components): with both, where the time went.
	LoadCPUSeconds      float64
	PlaneLoadCPUSeconds map[string]float64
	// PlaneLoadRequests is what the apiserver served over HealthySeconds,
	// every client's, by "verb resource" (planeRequests): with the
	// clients' QPS limits, which of them bounds the pace.
	PlaneLoadRequests map[string]float64
	Healthy           KubeMemory
	HealthyObjects    KubeObjects
	// Foreign: after ForeignPods pods and ForeignReplicaSets ReplicaSets
	// without sluice's labels were created and every such pod is Running.
	ForeignPods, ForeignReplicaSets int
	Foreign                         KubeMemory
	ForeignObjects                  KubeObjects
}

var sluiceRolloutsResource = schema.GroupVersionResource{Group: "sluice.io", Version: "v1alpha1", Resource: "sluicerollouts"}

// sluiceNamespace holds sluice's state ConfigMap (--namespace).
const sluiceNamespace = "sluice-system"

// RunKube runs the Kubernetes-mode benchmark once. The caller must be in
// kubetest.EnterNetns (kwok's pod IPs are local there).
func RunKube(ctx context.Context, cfg KubeConfig) (res KubeResult, err error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Rollouts <= 0 || cfg.Namespaces <= 0 || cfg.Nodes <= 0 {
		return res, errors.New("need rollouts, namespaces and nodes > 0")
	}
	say := func(format string, a ...any) {
		fmt.Fprintf(cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	res = KubeResult{Rollouts: cfg.Rollouts, Namespaces: cfg.Namespaces, Nodes: cfg.Nodes, KCMArgs: cfg.KCMArgs,
		ForeignPods: cfg.ForeignPods, ForeignReplicaSets: cfg.ForeignReplicaSets, LoadAverageStart: loadAverage()}
	defer func() { res.LoadAverageEnd = loadAverage() }()

	bin := cfg.Sluice
	if bin == "" {
		say("building sluice")
		if bin, err = buildSluice(ctx, cfg.Dir); err != nil {
			return res, err
		}
	}
	say("starting the control plane")
	c, err := kubetest.Start(0, cfg.KCMArgs)
	if err != nil {
		return res, err
	}
	defer c.Stop()
	k, err := newKubeFixture(c)
	if err != nil {
		return res, err
	}
	perNode := (cfg.Rollouts+cfg.ForeignPods)/cfg.Nodes*2 + 110
	if err := k.createNodes(ctx, cfg.Nodes, perNode); err != nil {
		return res, err
	}
	namespaces := []string{sluiceNamespace}
	for ns := range cfg.Namespaces {
		namespaces = append(namespaces, fmt.Sprintf("ns-%03d", ns))
	}
	if err := k.createNamespaces(ctx, namespaces); err != nil {
		return res, err
	}
	if err := kubetest.ApplyCRDFile(ctx, k.dyn, filepath.Join(moduleRoot(), "charts", "sluice", "crds", "sluice.io_sluicerollouts.yaml")); err != nil {
		return res, err
	}

	say("generating %d rollouts in %d namespaces", cfg.Rollouts, cfg.Namespaces)
	repo, err := newGitRepo(cfg.Dir)
	if err != nil {
		return res, err
	}
	f := fleet{n: cfg.Rollouts, namespaces: cfg.Namespaces}
	files := map[string]string{}
	for i := range cfg.Rollouts {
		files[f.file(i)] = f.kubeRolloutYAML(i, versionOld)
	}
	if _, err := repo.push("every rollout at v1", files); err != nil {
		return res, err
	}
	say("starting sluice run --kubernetes")
	plane0 := readPlaneCPU(c)
	requests0, err := planeRequests(ctx, c)
	if err != nil {
		return res, err
	}
	start := time.Now()
	d, apic, debugAddr, err := startKubeDaemon(ctx, bin, cfg.Dir, repo, c.Kubeconfig, "kubernetes", cfg.DaemonArgs)
	if err != nil {
		return res, err
	}
	defer d.stop()
	if err := k.waitPodsRunning(ctx, cfg.Rollouts, say); err != nil {
		return res, err
	}
	if err := waitHealthy(ctx, apic, cfg.Rollouts); err != nil {
		return res, err
	}
	res.HealthySeconds = time.Since(start).Seconds()
	res.LoadCPUSeconds, res.PlaneLoadCPUSeconds = cpuSeconds(d.pid), readPlaneCPU(c).since(plane0)
	if res.PlaneLoadRequests, err = planeRequestsSince(ctx, c, requests0); err != nil {
		return res, err
	}
	say("every rollout Healthy with its pod Running after %.1fs", res.HealthySeconds)
	if res.Healthy, err = readMemory(d, debugAddr, filepath.Join(cfg.Dir, "heap-healthy.pb.gz")); err != nil {
		return res, err
	}
	if res.HealthyObjects, err = k.countObjects(ctx); err != nil {
		return res, err
	}
	if cfg.ForeignPods == 0 && cfg.ForeignReplicaSets == 0 {
		return res, nil
	}

	say("creating %d foreign pods and %d foreign ReplicaSets", cfg.ForeignPods, cfg.ForeignReplicaSets)
	if err := k.createForeign(ctx, cfg.Nodes, cfg.ForeignPods, cfg.ForeignReplicaSets); err != nil {
		return res, err
	}
	if err := k.waitForeignRunning(ctx, cfg.ForeignPods); err != nil {
		return res, err
	}
	if res.Foreign, err = readMemory(d, debugAddr, filepath.Join(cfg.Dir, "heap-foreign.pb.gz")); err != nil {
		return res, err
	}
	if res.ForeignObjects, err = k.countObjects(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// kubeRolloutYAML is rollout i at image version in Kubernetes mode: one
// replica, routed by sluice.io/xds with endpoints from its pods.
func (f fleet) kubeRolloutYAML(i int, version string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %s
  namespace: %s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
      - name: app
        image: %q
        ports: [{containerPort: 8080}]
  strategy:
    canary:
      steps:
      - setWeight: 10
      - pause: {}
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: %s
`, f.name(i), f.namespace(i), f.name(i), f.name(i), version, f.host(i))
}

// kubeFixture talks to the benchmark's control plane.
type kubeFixture struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
}

func newKubeFixture(c *kubetest.Cluster) (*kubeFixture, error) {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	return &kubeFixture{client: c.Client, dyn: dyn}, nil
}

// createNodes creates n kwok nodes over zone-a|b|c, each taking pods
// pods, and waits until kwok reports them all Ready.
func (k *kubeFixture) createNodes(ctx context.Context, n, pods int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse(strconv.Itoa(pods)),
	}
	zones := []string{"zone-a", "zone-b", "zone-c"}
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name,
					workload.ZoneLabel: zones[i%len(zones)], "topology.kubernetes.io/region": "region-1"},
				Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{Allocatable: capacity, Capacity: capacity},
		}
		if _, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	return poll(ctx, 2*time.Minute, fmt.Sprintf("%d nodes Ready", n), func() (bool, string, error) {
		list, err := k.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
					ready++
				}
			}
		}
		return ready == n, fmt.Sprintf("%d Ready and untainted", ready), nil
	})
}

func (k *kubeFixture) createNamespaces(ctx context.Context, names []string) error {
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := k.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}

// listPods pages through the pods matching selector ("" = all).
func (k *kubeFixture) listPods(ctx context.Context, namespace, selector string, each func(*corev1.Pod)) error {
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return k.client.CoreV1().Pods(namespace).List(ctx, o)
	})
	p.PageSize = 2000
	return p.EachListItem(ctx, metav1.ListOptions{LabelSelector: selector}, func(obj runtime.Object) error {
		each(obj.(*corev1.Pod))
		return nil
	})
}

var sluiceSelector = workload.LabelManagedBy + "=" + workload.ManagedByValue

// waitPodsRunning waits until n of sluice's pods are Running, reporting
// progress every 30 s (the pace is the ReplicaSet controller's QPS).
func (k *kubeFixture) waitPodsRunning(ctx context.Context, n int, say func(string, ...any)) error {
	last := time.Now()
	return poll(ctx, time.Hour, fmt.Sprintf("%d sluice pods Running", n), func() (bool, string, error) {
		running, all := 0, 0
		err := k.listPods(ctx, "", sluiceSelector, func(p *corev1.Pod) {
			all++
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		})
		state := fmt.Sprintf("%d pods, %d Running", all, running)
		if time.Since(last) > 30*time.Second {
			say("%s", state)
			last = time.Now()
		}
		return running >= n, state, err
	})
}

// createForeign creates pods pods (already bound to a node, so that kwok
// runs them without any scheduler) and sets ReplicaSets of zero replicas
// in the namespace "foreign", none of them labelled for sluice.
func (k *kubeFixture) createForeign(ctx context.Context, nodes, pods, sets int) error {
	if err := k.createNamespaces(ctx, []string{"foreign"}); err != nil {
		return err
	}
	zero := int32(0)
	for i := range sets {
		name := fmt.Sprintf("foreign-%05d", i)
		labels := map[string]string{"app": name}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "foreign/app:v1"}}}}},
		}
		if _, err := k.client.AppsV1().ReplicaSets("foreign").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create replicaset %s: %w", name, err)
		}
	}
	for i := range pods {
		name := fmt.Sprintf("foreign-%05d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "foreign"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%nodes),
				Containers: []corev1.Container{{Name: "app", Image: "foreign/app:v1",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		}
		if _, err := k.client.CoreV1().Pods("foreign").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", name, err)
		}
	}
	return nil
}

func (k *kubeFixture) waitForeignRunning(ctx context.Context, n int) error {
	return poll(ctx, 30*time.Minute, fmt.Sprintf("%d foreign pods Running", n), func() (bool, string, error) {
		running := 0
		err := k.listPods(ctx, "foreign", "", func(p *corev1.Pod) {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		})
		return running >= n, fmt.Sprintf("%d Running", running), err
	})
}

// countObjects counts what each of sluice's informers caches, from the
// apiserver with the informers' own selectors.
func (k *kubeFixture) countObjects(ctx context.Context) (KubeObjects, error) {
	var o KubeObjects
	err := k.listPods(ctx, "", "", func(p *corev1.Pod) {
		o.AllPods++
		if p.Labels[workload.LabelManagedBy] == workload.ManagedByValue {
			o.SluicePods++
			if p.Status.Phase == corev1.PodRunning {
				o.RunningSluicePods++
			}
		}
	})
	if err != nil {
		return o, err
	}
	sets, err := k.client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, err
	}
	o.AllReplicaSets = len(sets.Items)
	for _, rs := range sets.Items {
		if rs.Labels[workload.LabelManagedBy] == workload.ManagedByValue {
			o.SluiceReplicaSets++
		}
	}
	nodes, err := k.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, err
	}
	o.Nodes = len(nodes.Items)
	records, err := k.dyn.Resource(sluiceRolloutsResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("list sluicerollouts: %w", err)
	}
	o.SluiceRollouts = len(records.Items)
	return o, nil
}

// readMemory reads RSS, heap and goroutines from /metrics, then forces a
// GC through pprof's heap endpoint (?gc=1, whose profile it keeps at
// profile) and reads the heap again.
func readMemory(d *daemon, debugAddr, profile string) (KubeMemory, error) {
	var m KubeMemory
	s, err := d.scrape()
	if err != nil {
		return m, err
	}
	m.HeapInuseBytes, m.Goroutines = s.Samples["go_memstats_heap_inuse_bytes"], s.Samples["go_goroutines"]
	resp, err := http.Get("http://" + debugAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return m, fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return m, fmt.Errorf("heap profile: %w", err)
	}
	if err := os.WriteFile(profile, b, 0o644); err != nil {
		return m, err
	}
	m.HeapProfilePath = profile
	if s, err = d.scrape(); err != nil {
		return m, err
	}
	m.HeapAfterGC = s.Samples["go_memstats_heap_inuse_bytes"]
	m.RSSBytes, err = rssBytes(d.pid)
	m.PeakRSSBytes = peakRSS(d.pid)
	return m, err
}

// poll calls cond every 500 ms until it holds, failing after timeout with
// what was awaited and what cond last saw.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, state, err := cond()
		if ok && err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v; last seen: %s (err %v)", what, timeout, state, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startKubeDaemon runs sluice run --kubernetes on kubeconfig with the
// given state store, sluice's namespace, a pprof listener (its address is
// returned) and extra flags, and an API client of it.
func startKubeDaemon(ctx context.Context, bin, dir string, repo *gitRepo, kubeconfig, store string, extra []string) (*daemon, *client.Client, string, error) {
	debugAddr, err := testkit.FreeAddr()
	if err != nil {
		return nil, nil, "", err
	}
	args := append([]string{"--kubernetes", "--kubeconfig", kubeconfig, "--state-store", store,
		"--namespace", sluiceNamespace, "--debug-addr", debugAddr}, extra...)
	d, err := startDaemon(ctx, bin, dir, repo, args)
	if err != nil {
		return nil, nil, "", err
	}
	apic, err := client.New(client.Options{Server: d.url, Timeout: time.Minute})
	if err != nil {
		d.stop()
		return nil, nil, "", err
	}
	return d, apic, debugAddr, nil
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

func printKubeTable(w io.Writer, r KubeResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	mem := func(m KubeMemory) string {
		return fmt.Sprintf("RSS %s (peak so far %s), heap %s (%s after GC), %.0f goroutines",
			mib(float64(m.RSSBytes)), mib(float64(m.PeakRSSBytes)), mib(m.HeapInuseBytes), mib(m.HeapAfterGC), m.Goroutines)
	}
	objs := func(o KubeObjects) string {
		return fmt.Sprintf("sluice RS %d / pods %d (%d Running); all RS %d / pods %d; nodes %d; SluiceRollouts %d",
			o.SluiceReplicaSets, o.SluicePods, o.RunningSluicePods, o.AllReplicaSets, o.AllPods, o.Nodes, o.SluiceRollouts)
	}
	rows := [][2]string{
		{"rollouts / namespaces / nodes", fmt.Sprintf("%d / %d / %d", r.Rollouts, r.Namespaces, r.Nodes)},
		{"kube-controller-manager extra flags", r.KCMArgs},
		{"load average (start → end)", r.LoadAverageStart + " → " + r.LoadAverageEnd},
		{"start → every rollout Healthy, its pod Running", fmt.Sprintf("%.1f s", r.HealthySeconds)},
		{"  CPU of sluice / of its control plane meanwhile", fmt.Sprintf("%.1f s / %s", r.LoadCPUSeconds, planeCPUString(r.PlaneLoadCPUSeconds))},
		{"  apiserver requests meanwhile (every client's)", requestsString(r.PlaneLoadRequests, r.Rollouts)},
		{"healthy: memory", mem(r.Healthy)},
		{"healthy: objects in the cluster", objs(r.HealthyObjects)},
		{"healthy: heap after GC per rollout", fmt.Sprintf("%.1f KiB", r.Healthy.HeapAfterGC/float64(r.Rollouts)/1024)},
	}
	if r.ForeignPods+r.ForeignReplicaSets > 0 {
		rows = append(rows,
			[2]string{fmt.Sprintf("+%d foreign pods, +%d foreign RS: memory", r.ForeignPods, r.ForeignReplicaSets), mem(r.Foreign)},
			[2]string{"  objects in the cluster", objs(r.ForeignObjects)},
			[2]string{"  heap after GC grew by", mib(r.Foreign.HeapAfterGC - r.Healthy.HeapAfterGC)},
		)
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}
