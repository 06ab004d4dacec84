package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/sluice-dev/sluice/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Benchmark settings, from the environment (defaults in brackets):
// SLUICE_BENCH_NODES [1000] kwok nodes, SLUICE_BENCH_PODS [2000] pods per
// scheduler, SLUICE_BENCH_CANARY_RUNS [10] 20-pod canaries,
// SLUICE_BENCH_PPROF [none] CPU profile of the binder phase,
// SLUICE_BENCH_QPS [5000] client QPS (burst twice that) of both schedulers.
func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkBindRate measures, on one control plane with 1,000 kwok nodes,
// how many pods per second sluice's binder binds and kube-scheduler
// (same binaries' build, same client QPS) binds, each placing the same
// 2,000 pre-created Pending pods (20 groups of 100, 100m CPU each) from a
// cold start; then the time from creating a 20-pod canary ReplicaSet to
// all its pods bound by sluice, over 10 runs. Run it alone:
//
//	go test ./scheduler/kube/ -run '^$' -bench BindRate -benchtime 1x -timeout 30m
//
// Pods are created before each scheduler starts because the ReplicaSet
// controller creates pods at kube-controller-manager's client rate (and in
// slow-start batches), which would measure that controller, not the
// scheduler. The canary run goes through the ReplicaSet controller on
// purpose: that is what a push costs.
func BenchmarkBindRate(b *testing.B) {
	c := kubetest.Shared(b)
	ctx := context.Background()
	nodes, pods, runs := benchEnv("SLUICE_BENCH_NODES", 1000), benchEnv("SLUICE_BENCH_PODS", 2000), benchEnv("SLUICE_BENCH_CANARY_RUNS", 10)
	qps := float32(benchEnv("SLUICE_BENCH_QPS", 5000))
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = qps, int(2*qps)
	client := kubernetes.NewForConfigOrDie(cfg)

	start := time.Now()
	if err := addNodes(ctx, client, nodes); err != nil {
		b.Fatal(err)
	}
	removeNotReadyTaints(b, client)
	b.Logf("%d nodes ready in %v", nodes, time.Since(start).Round(time.Millisecond))

	for i := 0; i < b.N; i++ {
		ns := c.Namespace(b)
		sluice := measureSluice(b, c, client, ns, pods)
		deletePods(b, client, ns)
		kube := measureKubeScheduler(b, c, client, ns, pods, qps)
		deletePods(b, client, ns)
		b.Logf("sluice binder:  %d pods in %v → %.0f pods/s (%s)", pods, sluice.span.Round(time.Millisecond), sluice.rate(), sluice.detail)
		b.Logf("kube-scheduler: %d pods in %v → %.0f pods/s (%s)", pods, kube.span.Round(time.Millisecond), kube.rate(), kube.detail)
		b.Logf("CPU per pod bound, scheduler start to last bind: sluice phase %s; kube-scheduler phase %s", sluice.cpu, kube.cpu)
		b.Logf("ratio sluice/kube-scheduler: %.2f", sluice.rate()/kube.rate())
		b.ReportMetric(sluice.rate(), "sluice-pods/s")
		b.ReportMetric(kube.rate(), "kube-scheduler-pods/s")
		b.ReportMetric(sluice.rate()/kube.rate(), "ratio")
		p50 := measureCanary(b, client, c.Namespace(b), runs)
		b.ReportMetric(float64(p50.Milliseconds()), "canary20-p50-ms")
	}
}

// addNodes creates kwok nodes up to total (node-<i>, zones a|b|c in
// turn, like run-controlplane.sh) with 32 parallel requests, and waits
// until kwok reports them all Ready.
func addNodes(ctx context.Context, client kubernetes.Interface, total int) error {
	existing, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, n := range existing.Items {
		have[n.Name] = true
	}
	zones := []string{"zone-a", "zone-b", "zone-c"}
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := newNode(ctx, client, fmt.Sprintf("node-%d", i), zones[i%3], "8", nil); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range total {
		if !have[fmt.Sprintf("node-%d", i)] {
			work <- i
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready >= total {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes Ready after 5m", ready, total)
		}
		time.Sleep(time.Second)
	}
}

// createPendingPods creates n pods for scheduler sched in groups of 100
// (a rollout version each), 32 requests in parallel. Their names start
// with sched: a DeleteCollection of the previous phase's pods that timed
// out for the client may still be deleting by name in the apiserver, and
// took pods of the same names from the next phase (kube-scheduler's binds
// failed with "not found" and the phase never finished).
func createPendingPods(b *testing.B, client kubernetes.Interface, ns, sched string, n int) {
	b.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				tmpl := podTemplate(sched, "100m", rolloutLabels(fmt.Sprintf("app%d", i/100), "h"))
				_, err := client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", sched, i), Namespace: ns, Labels: tmpl.Labels},
					Spec:       tmpl.Spec,
				}, metav1.CreateOptions{})
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// bindWatch records when each pod of a namespace is first seen bound.
type bindWatch struct {
	mu          sync.Mutex
	bound       map[string]bool
	seen        map[string]bool
	first, last time.Time
	lastSeen    time.Time // when the last new pod appeared
	want        int
	done        chan struct{}
	stop        chan struct{}
}

func watchBinds(client kubernetes.Interface, ns string, want int) *bindWatch {
	w := &bindWatch{bound: map[string]bool{}, seen: map[string]bool{}, want: want, done: make(chan struct{}), stop: make(chan struct{})}
	// The typed client lists and watches in protobuf; a raw RESTClient
	// (cache.NewListWatchFromClient) decodes JSON, which made this
	// measuring watch half of the test process's CPU in the binder phase
	// and cost the apiserver a JSON encoding of every pod update.
	pods := client.CoreV1().Pods(ns)
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
	}
	_, ctl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    w.see,
			UpdateFunc: func(_, obj any) { w.see(obj) },
		},
	})
	go ctl.Run(w.stop)
	for !ctl.HasSynced() {
		time.Sleep(10 * time.Millisecond)
	}
	return w
}

func (w *bindWatch) see(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.seen[p.Name] {
		w.seen[p.Name] = true
		w.lastSeen = time.Now()
	}
	if p.Spec.NodeName == "" || w.bound[p.Name] {
		return
	}
	now := time.Now()
	if len(w.bound) == 0 {
		w.first = now
	}
	w.bound[p.Name] = true
	w.last = now
	if len(w.bound) == w.want {
		close(w.done)
	}
}

// wait waits for every pod bound and returns first and last bind times.
func (w *bindWatch) wait(b *testing.B, timeout time.Duration) (first, last time.Time) {
	b.Helper()
	defer close(w.stop)
	select {
	case <-w.done:
	case <-time.After(timeout):
		w.mu.Lock()
		n := len(w.bound)
		w.mu.Unlock()
		b.Fatalf("%d of %d pods bound after %v", n, w.want, timeout)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first, w.last
}

// phase is one scheduler's result: pods bound between the first and the
// last bind, and where the time went.
type phase struct {
	pods   int
	span   time.Duration
	detail string
	cpu    string // CPU per pod of the scheduler and the control plane
}

func (p phase) rate() float64 { return float64(p.pods-1) / p.span.Seconds() }

func measureSluice(b *testing.B, c *kubetest.Cluster, client kubernetes.Interface, ns string, n int) phase {
	createPendingPods(b, client, ns, DefaultSchedulerName, n)
	w := watchBinds(client, ns, n)
	reg := prometheus.NewRegistry()
	binder, err := New(Options{Client: client, Metrics: reg, BindWorkers: benchEnv("SLUICE_BENCH_BIND_WORKERS", 64)})
	if err != nil {
		b.Fatal(err)
	}
	if path := os.Getenv("SLUICE_BENCH_PPROF"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cpu := startCPU(c, map[string]int{"sluice (test process)": os.Getpid()})
	t0 := time.Now()
	go func() { done <- binder.Run(ctx) }()
	first, last := w.wait(b, 10*time.Minute)
	used := cpu.perPod(n)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, f := range families {
		fams[f.GetName()] = f
	}
	detail := fmt.Sprintf("start→first bind %v; mean scheduling cycle %s, mean pods/binding call %s, mean first-seen→bound %s",
		first.Sub(t0).Round(time.Millisecond),
		histMean(fams["sluice_scheduler_decision_seconds"], "result", "scheduled"),
		histMean(fams["sluice_binder_bind_duration_seconds"], "", ""),
		histMean(fams["sluice_binder_pod_scheduling_seconds"], "", ""))
	return phase{pods: n, span: last.Sub(first), detail: detail, cpu: used}
}

// histMean is sum/count of the histogram in f whose label has value
// (any when label is empty).
func histMean(f *dto.MetricFamily, label, value string) string {
	var sum float64
	var count uint64
	for _, m := range f.GetMetric() {
		if label != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
			continue
		}
		sum += m.GetHistogram().GetSampleSum()
		count += m.GetHistogram().GetSampleCount()
	}
	if count == 0 {
		return "n/a"
	}
	return time.Duration(sum / float64(count) * float64(time.Second)).Round(time.Microsecond).String()
}

func measureKubeScheduler(b *testing.B, c *kubetest.Cluster, client kubernetes.Interface, ns string, n int, qps float32) phase {
	createPendingPods(b, client, ns, "default-scheduler", n)
	w := watchBinds(client, ns, n)
	t0 := time.Now()
	port, stop := kubetest.StartKubeScheduler(b, c, qps)
	defer stop()
	cpu := startCPU(c, map[string]int{"kube-scheduler": kubeSchedulerPID(port)})
	first, last := w.wait(b, 10*time.Minute)
	used := cpu.perPod(n)
	detail := fmt.Sprintf("start→first bind %v; %s", first.Sub(t0).Round(time.Millisecond), kubeSchedulerMetrics(port))
	return phase{pods: n, span: last.Sub(first), detail: detail, cpu: used}
}

// cpuMeter reads the CPU time (user+system) of the scheduler and the
// control plane's processes at a phase's start, to tell at its end what
// each spent per pod: where a phase's time went when the machine is the
// limit (the apiserver's share is what a scheduler's requests cost).
type cpuMeter struct {
	pids   map[string]int
	names  []string
	before map[string]float64
}

func startCPU(c *kubetest.Cluster, scheduler map[string]int) *cpuMeter {
	m := &cpuMeter{pids: map[string]int{}, before: map[string]float64{}}
	for name, pid := range scheduler {
		m.pids[name] = pid
		m.names = append(m.names, name)
	}
	for _, name := range []string{"apiserver", "etcd", "controller-manager", "kwok"} {
		raw, err := os.ReadFile(filepath.Join(c.Dir, name+".pid"))
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && perr == nil {
			m.pids[name] = pid
			m.names = append(m.names, name)
		}
	}
	for name, pid := range m.pids {
		m.before[name] = cpuSeconds(pid)
	}
	return m
}

// perPod is each process's CPU since startCPU, in ms per pod of n.
func (m *cpuMeter) perPod(n int) string {
	var parts []string
	for _, name := range m.names {
		used := cpuSeconds(m.pids[name]) - m.before[name]
		parts = append(parts, fmt.Sprintf("%s %.2f ms", name, 1000*used/float64(n)))
	}
	return strings.Join(parts, ", ")
}

// cpuSeconds is a process's user+system CPU time (0 when unreadable).
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in ")":
	// utime and stime are the 12th and 13th, in clock ticks of 1/100 s.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// kubeSchedulerPID finds the kube-scheduler serving on port (0 when none).
func kubeSchedulerPID(port int) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	want := "--secure-port\x00" + strconv.Itoa(port) + "\x00"
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(raw), "kube-scheduler") || !strings.Contains(string(raw), want) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		return pid
	}
	return 0
}

// kubeSchedulerMetrics summarises kube-scheduler's own timing metrics.
func kubeSchedulerMetrics(port int) string {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
	if err != nil {
		return "metrics: " + err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Sprintf("metrics: %s %s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return "metrics: " + err.Error()
	}
	return fmt.Sprintf("mean scheduling attempt %s, mean algorithm %s, mean Bind extension point %s, mean pod SLI (queue→bound) %s",
		histMean(fams["scheduler_scheduling_attempt_duration_seconds"], "result", "scheduled"),
		histMean(fams["scheduler_scheduling_algorithm_duration_seconds"], "", ""),
		histMean(fams["scheduler_framework_extension_point_duration_seconds"], "extension_point", "Bind"),
		histMean(fams["scheduler_pod_scheduling_sli_duration_seconds"], "", ""))
}

// deletePods deletes every pod of ns at once and waits until none is left.
// Under load a DeleteCollection of 2,000 pods can outlast the apiserver's
// 60 s request timeout (an HTTP/2 INTERNAL_ERROR for the client) while
// the deletion goes on, so a failed call is logged and issued again.
func deletePods(b *testing.B, client kubernetes.Interface, ns string) {
	b.Helper()
	ctx := context.Background()
	zero := int64(0)
	deleted := false
	kubetest.Eventually(b, 5*time.Minute, "every pod deleted", func() (bool, string) {
		if !deleted {
			err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
			if err != nil {
				b.Logf("delete pods of %s: %v (trying again)", ns, err)
				return false, err.Error()
			}
			deleted = true
		}
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 0, fmt.Sprintf("%d left", len(l.Items))
	})
}

// measureCanary runs the binder and, runs times, creates a 20-pod canary
// ReplicaSet and times it until all 20 pods are bound; it returns the p50.
func measureCanary(b *testing.B, client kubernetes.Interface, ns string, runs int) time.Duration {
	binder, err := New(Options{Client: client})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- binder.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	var times, created []time.Duration
	for i := range runs {
		hash := fmt.Sprintf("c%d", i)
		w := watchBinds(client, ns, 20)
		t0 := time.Now()
		createReplicaSet(b, client, ns, "canary-"+hash, 20, podTemplate(DefaultSchedulerName, "100m", rolloutLabels("canary", hash)))
		_, last := w.wait(b, 2*time.Minute)
		times = append(times, last.Sub(t0))
		w.mu.Lock()
		created = append(created, w.lastSeen.Sub(t0))
		w.mu.Unlock()
		if err := client.AppsV1().ReplicaSets(ns).Delete(ctx, "canary-"+hash, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		deletePods(b, client, ns)
	}
	slices.Sort(times)
	slices.Sort(created)
	b.Logf("push → 20 canary pods created by the ReplicaSet controller: p50 %v", created[len(created)/2].Round(time.Millisecond))
	b.Logf("push → 20 canary pods bound: p50 %v, min %v, max %v over %d runs", times[len(times)/2].Round(time.Millisecond), times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), runs)
	return times[len(times)/2]
}
