package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// kubePort is the container port of the test rollouts: sluice sends
// traffic to <pod IP>:kubePort, where podBackends serves each pod.
const kubePort = 8080

// kubeRollout writes a Rollout for Kubernetes mode: no endpoints in git,
// pods from spec.template in namespace ns.
type kubeRollout struct {
	Name, Namespace, Host, Version string
	Replicas                       int
	Steps                          string // YAML list of steps, unindented
	PodLabels                      string // extra pod labels, e.g. `neverready: "true"`
	Canary                         string // extra canary strategy fields, unindented
	Spec                           string // extra spec fields, unindented
	// TrafficRouting replaces the trafficRouting block (the sluice.io/xds
	// plugin at Host), unindented.
	TrafficRouting string
}

func (r kubeRollout) yaml() string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  replicas: %[3]d
%[4]s  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s%[10]s}
    spec:
      containers:
      - name: app
        image: %[5]q
        ports: [{containerPort: %[6]d}]
  strategy:
    canary:
%[7]s      steps:
%[8]s      trafficRouting:
%[9]s`, r.Name, r.Namespace, r.Replicas, indentOpt(r.Spec, 2), r.Version, kubePort,
		indentOpt(r.Canary, 6), indent(r.Steps, 6), indent(r.trafficRouting(), 8), prefixOpt(", ", r.PodLabels))
}

func (r kubeRollout) trafficRouting() string {
	if r.TrafficRouting != "" {
		return r.TrafficRouting
	}
	return "plugins:\n  sluice.io/xds:\n    host: " + r.Host + "\n"
}

func prefixOpt(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func indentOpt(s string, n int) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return indent(s, n)
}

// baselineSuffix marks the answers of a baseline pod's backend.
const baselineSuffix = " (baseline)"

// podBackends serves a real gRPC backend on the IP of every pod of a
// namespace that kwok reports Running, answering with the pod's image
// (with baselineSuffix for a baseline's pod): clients that reach version v
// reached a pod of v. A pod's backend stops
// when the pod is deleted.
type podBackends struct {
	t *testing.T
	// tag, when set, follows the version a backend answers with
	// ("v2@eu-1"), so that a call tells which cluster's pod answered.
	tag string
	mu  sync.Mutex
	by  map[string]*podBackend // pod IP → backend
}

type podBackend struct {
	pod, version string
	stop         func()
}

func startPodBackends(t *testing.T, c *kubetest.Cluster, ns string) *podBackends {
	t.Helper()
	return startTaggedPodBackends(t, c, ns, "")
}

// startTaggedPodBackends is startPodBackends whose backends answer with
// "<version>@<tag>" (tag "": the version alone).
func startTaggedPodBackends(t *testing.T, c *kubetest.Cluster, ns, tag string) *podBackends {
	t.Helper()
	pb := &podBackends{t: t, tag: tag, by: map[string]*podBackend{}}
	f := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	sync := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			pb.sync(p)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj any) { sync(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				pb.remove(p.Status.PodIP)
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
		pb.mu.Lock()
		defer pb.mu.Unlock()
		for ip, b := range pb.by {
			b.stop()
			delete(pb.by, ip)
		}
	})
	return pb
}

func (pb *podBackends) sync(p *corev1.Pod) {
	ip := p.Status.PodIP
	if ip == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return
	}
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if _, ok := pb.by[ip]; ok {
		return
	}
	version := p.Spec.Containers[0].Image
	if p.Labels[api.BaselineLabel] == "true" {
		version += baselineSuffix // the stable's image: tell its calls apart
	}
	if pb.tag != "" {
		version += "@" + pb.tag
	}
	b, err := probe.NewBackend(probe.BackendOptions{Version: version, Window: 5 * time.Second})
	if err != nil {
		pb.t.Errorf("backend for pod %s: %v", p.Name, err)
		return
	}
	gl, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(kubePort)))
	if err != nil {
		pb.t.Errorf("listen on pod %s's IP %s (is the test in kubetest's network namespace?): %v", p.Name, ip, err)
		return
	}
	hl, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		gl.Close()
		pb.t.Errorf("listen on %s: %v", ip, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.Serve(ctx, gl, hl); close(done) }()
	pb.by[ip] = &podBackend{pod: p.Name, version: b.Version(), stop: func() { cancel(); <-done }}
}

func (pb *podBackends) remove(ip string) {
	pb.mu.Lock()
	b, ok := pb.by[ip]
	delete(pb.by, ip)
	pb.mu.Unlock()
	if ok {
		b.stop()
	}
}

// pods lists a namespace's pods that match sel.
func kubePods(t *testing.T, c *kubetest.Cluster, ns, sel string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// zonesOf counts the bound pods of a list per zone of their node.
func zonesOf(t *testing.T, c *kubetest.Cluster, pods []corev1.Pod) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctxFor(t, 10*time.Second), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[n.Labels[corev1.LabelTopologyZone]]++
	}
	return out
}

// selector is a label selector string for a rollout's pods of one hash
// ("" for all of them).
func selector(rollout, hash string) string {
	set := labels.Set{"sluice.io/rollout": rollout}
	if hash != "" {
		set["rollouts-pod-template-hash"] = hash
	}
	return set.String()
}
