package charttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/hash"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// The scenario: rollout "kr" (2 replicas, canaryService/stableService,
// revisionHistoryLimit 0) whose v1 ReplicaSet already runs, created by
// hand, for sluice to adopt; v2 is canaried to its promotion through an
// analysis step whose job metric runs a Job (the jobs rule). Rollout
// "kx" asks for more CPU than any node has, so the scheduler reports it
// unschedulable. Together they use every rule of the chart's ClusterRole.
const (
	v1Image  = "shop/kr:v1"
	v2Image  = "shop/kr:v2"
	podPort  = 8080
	kxCPU    = "500" // cores: more than a kwok node has
	waitLong = 90 * time.Second
)

// krRollout is rollout "kr" at image.
func krRollout(ns, image string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: kr, namespace: %[1]s}
spec:
  replicas: 2
  revisionHistoryLimit: 0
  selector:
    matchLabels: {app: kr}
  template:
    metadata:
      labels: {app: kr}
    spec:
      containers:
      - name: app
        image: %[2]q
        ports: [{containerPort: %[3]d}]
  strategy:
    canary:
      scaleDownDelaySeconds: 1
      canaryService: kr-canary
      stableService: kr-stable
      steps:
      - setWeight: 50
      - pause: {duration: 1s}
      - analysis: {templates: [{templateName: smoke}]}
      trafficRouting:
        plugins:
          sluice.io/xds: {host: kr.charttest}
`, ns, image, podPort)
}

// smokeTemplate is kr's analysis: one job metric. kwok completes the Job's
// pod; the pod names its node, as the control plane has no kube-scheduler.
func smokeTemplate(ns string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: smoke, namespace: %s}
spec:
  metrics:
  - name: smoke
    provider:
      job:
        spec:
          backoffLimit: 0
          template:
            spec:
              nodeName: node-0
              containers: [{name: smoke, image: shop/smoke:v1}]
              restartPolicy: Never
`, ns)
}

// kxRollout is rollout "kx", whose pod fits no node.
func kxRollout(ns string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: kx, namespace: %[1]s}
spec:
  replicas: 1
  selector:
    matchLabels: {app: kx}
  template:
    metadata:
      labels: {app: kx}
    spec:
      containers:
      - name: app
        image: shop/kx:v1
        ports: [{containerPort: %[2]d}]
        resources: {requests: {cpu: %[3]q}}
  strategy:
    canary:
      steps: [{setWeight: 50}]
      trafficRouting:
        plugins:
          sluice.io/xds: {host: kx.charttest}
`, ns, podPort, kxCPU)
}

// chartRBAC is the ClusterRole and the Role in sluice's own namespace
// that the chart renders with default values (all namespaces).
func chartRBAC(t *testing.T) (cluster, self *rbacv1.ClusterRole) {
	t.Helper()
	r, err := render(t, "sluice-system", loadValues(t, "values-default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range decodeManifest(t, r.Manifest) {
		// A Role's rules decode as a ClusterRole's: the test binds both
		// the same way.
		var role rbacv1.ClusterRole
		switch obj.GetKind() {
		case "ClusterRole", "Role":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		switch {
		case obj.GetKind() == "ClusterRole" && cluster == nil:
			cluster = &role
		case obj.GetKind() == "Role" && self == nil:
			self = &role
		default:
			t.Fatalf("chart renders a second %s %s with default values", obj.GetKind(), obj.GetName())
		}
	}
	if cluster == nil || self == nil {
		t.Fatalf("chart renders ClusterRole %v and Role %v; want one of each", cluster != nil, self != nil)
	}
	return cluster, self
}

// stateRule says whether rule is for --state-store kubernetes or
// --leader-elect.
func stateRule(rule rbacv1.PolicyRule) bool {
	return slices.ContainsFunc(rule.Resources, func(r string) bool {
		return strings.HasPrefix(r, "sluicerollouts") || r == "leases" || r == "configmaps"
	})
}

// TestRBACSuffices: with only the chart's ClusterRole, sluice adopts the
// hand-made ReplicaSet, canaries v2 to its promotion (Services pinned, the
// old ReplicaSet deleted past the history), reports kx unschedulable, and
// is refused nothing.
func TestRBACSuffices(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	cluster, self := chartRBAC(t)
	s := startScenario(t, c, ns, cluster, self)
	s.waitPromoted(t)
	s.waitUnschedulableReported(t)
	if denied := s.refusals(); denied != "" {
		t.Errorf("sluice was refused something with the chart's ClusterRole:\n%s", denied)
	}
}

// TestRBACEachRuleNeeded removes one rule at a time from the chart's
// ClusterRole and shows sluice refused something that rule allows (a
// refusal in its log naming the rule's resource), so the chart grants
// nothing sluice does not use.
func TestRBACEachRuleNeeded(t *testing.T) {
	c := kubetest.Shared(t)
	cluster, self := chartRBAC(t)
	state := hasStateFlags(t)
	for _, role := range []*rbacv1.ClusterRole{cluster, self} {
		for i, rule := range role.Rules {
			name := role.Kind + ":" + strings.Join(rule.Resources, ",") + ":" + strings.Join(rule.Verbs, ",")
			t.Run(name, func(t *testing.T) {
				if stateRule(rule) && !state {
					t.Skip("sluice run has no --state-store/--leader-elect yet")
				}
				t.Parallel()
				cluster, self := cluster.DeepCopy(), self.DeepCopy()
				if role.Kind == "ClusterRole" {
					cluster.Rules = slices.Delete(cluster.Rules, i, i+1)
				} else {
					self.Rules = slices.Delete(self.Rules, i, i+1)
				}
				ns := c.Namespace(t)
				s := startScenario(t, c, ns, cluster, self)
				want := make([]string, 0, len(rule.Resources))
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						want = append(want, fmt.Sprintf("cannot %s resource %q in API group %q", verb, res, rule.APIGroups[0]))
					}
				}
				s.waitBroken(t, want)
			})
		}
	}
}

// waitBroken waits for sluice to be refused one of want (a line of its
// log). A refusal sluice does not log still shows: the scenario then
// stalls, and at the deadline the test accepts a scenario that has not
// come to its end (with every rule it ends within seconds, see
// TestRBACSuffices) and fails on one that has.
func (s *scenario) waitBroken(t *testing.T, want []string) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	tick := time.NewTicker(200 * time.Millisecond) // polls sluice's log
	defer tick.Stop()
	for time.Now().Before(deadline) {
		refused := s.refusals()
		for _, w := range want {
			if strings.Contains(refused, w) {
				return
			}
		}
		<-tick.C
	}
	if done, state := s.completed(); done {
		t.Fatalf("nothing broke without the rule: the scenario completed and sluice was refused none of %q; refusals:\n%s", want, s.refusals())
	} else {
		t.Logf("no refusal logged, but the scenario stalled: %s", state)
	}
}

// completed says whether the scenario came to its end: v2 stable and kx
// reported unschedulable.
func (s *scenario) completed() (bool, string) {
	st, err := s.status("kr")
	if err != nil {
		return false, "kr: " + err.Error()
	}
	if st.Phase != "Healthy" || st.StableVersion != v2Image {
		return false, fmt.Sprintf("kr: %+v", st)
	}
	if ok, state := s.unschedulableReported(); !ok {
		return false, state
	}
	return true, ""
}

// scenario is one sluice process, run as a ServiceAccount with role,
// following a git repository with rollouts kr and kx.
type scenario struct {
	c        *kubetest.Cluster
	ns, sa   string
	repo     *gitRepo
	log      *syncBuffer
	httpAddr atomic.Pointer[string] // set once sluice serves
}

// startScenario sets the namespace up (Services, the v1 ReplicaSet to
// adopt), binds role to a fresh ServiceAccount, starts sluice as it, and
// pushes v1 then, once v1 is stable, v2.
func startScenario(t *testing.T, c *kubetest.Cluster, ns string, cluster, self *rbacv1.ClusterRole) *scenario {
	t.Helper()
	s := &scenario{c: c, ns: ns, sa: "sluice", log: &syncBuffer{}}
	for _, name := range []string{"kr-stable", "kr-canary"} {
		create(t, c.Client.CoreV1().Services(ns).Create, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "kr"},
				Ports: []corev1.ServicePort{{Port: podPort, TargetPort: intstr.FromInt32(podPort)}}},
		})
	}
	createAdoptable(t, c, ns)
	if hasStateFlags(t) {
		crds := chartCRDFiles(t)
		if len(crds) == 0 {
			t.Fatal("sluice run has --state-store but charts/sluice/crds holds no CRD")
		}
		for _, crd := range crds {
			applyCRDFile(t, c, crd)
		}
	}
	kubeconfig := s.bind(t, cluster, self)
	s.repo = newGitRepo(t)
	if err := s.repo.push("v1", map[string]string{"kr.yaml": krRollout(ns, v1Image), "kx.yaml": kxRollout(ns), "smoke.yaml": smokeTemplate(ns)}); err != nil {
		t.Fatal(err)
	}
	s.start(t, kubeconfig)
	ctx, cancel := context.WithCancel(context.Background())
	pushed := make(chan struct{})
	go func() { defer close(pushed); s.pushV2WhenStable(ctx) }()
	t.Cleanup(func() { cancel(); <-pushed })
	return s
}

// createAdoptable creates ReplicaSet kr-legacy: v1's pod-template hash,
// labelled sluice.io/rollout=kr, pods without sluice's labels. sluice
// adopts it for v1 and labels its pods (the pods patch rule).
func createAdoptable(t *testing.T, c *kubetest.Cluster, ns string) {
	t.Helper()
	var ro v1alpha1.Rollout
	if err := yaml.Unmarshal([]byte(krRollout(ns, v1Image)), &ro); err != nil {
		t.Fatal(err)
	}
	h := hash.ComputePodTemplateHash(&ro.Spec.Template, nil)
	tmpl := ro.Spec.Template.DeepCopy()
	tmpl.Labels["rollouts-pod-template-hash"] = h
	tmpl.Spec.SchedulerName = "sluice"
	create(t, c.Client.AppsV1().ReplicaSets(ns).Create, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kr-legacy", Labels: map[string]string{"sluice.io/rollout": "kr", "rollouts-pod-template-hash": h}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kr", "rollouts-pod-template-hash": h}},
			Template: *tmpl,
		},
	})
}

// create creates obj or fails the test.
func create[T any](t *testing.T, fn func(context.Context, T, metav1.CreateOptions) (T, error), obj T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := fn(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bind creates the chart's ServiceAccount, binds the cluster role to it
// (named after the namespace: ClusterRoles are cluster-wide) and self's
// rules as a Role in the namespace (sluice's own namespace here), and
// returns a kubeconfig that authenticates as it with a TokenRequest token.
func (s *scenario) bind(t *testing.T, cluster, self *rbacv1.ClusterRole) string {
	t.Helper()
	create(t, s.c.Client.RbacV1().Roles(s.ns).Create, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "sluice-self"}, Rules: self.Rules})
	create(t, s.c.Client.RbacV1().RoleBindings(s.ns).Create, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sluice-self"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sluice-self"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: s.ns, Name: s.sa}},
	})
	role := cluster.DeepCopy()
	role.ObjectMeta = metav1.ObjectMeta{Name: "sluice-" + s.ns}
	create(t, s.c.Client.RbacV1().ClusterRoles().Create, role)
	create(t, s.c.Client.CoreV1().ServiceAccounts(s.ns).Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.sa}})
	create(t, s.c.Client.RbacV1().ClusterRoleBindings().Create, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: s.ns, Name: s.sa}},
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = s.c.Client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := s.c.Client.CoreV1().ServiceAccounts(s.ns).CreateToken(ctx, s.sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: sluice, user: {token: %q}}]
contexts: [{name: local, context: {cluster: local, user: sluice}}]
current-context: local
`, s.c.Config.Host, tok.Status.Token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs `sluice run --kubernetes`. It does not wait for sluice to
// serve: without a rule it needs, sluice waits for its informers and never
// does; status answers once it serves.
func (s *scenario) start(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sluiceBin(t), "run", "--kubernetes", "--kubeconfig", kubeconfig,
		"--repo", s.repo.origin, "--branch", "main", "--interval", "500ms",
		"--state-dir", filepath.Join(t.TempDir(), "state"),
		"--xds-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json")
	if hasStateFlags(t) {
		// As the chart runs it: state in SluiceRollouts, elected, sluice's
		// own namespace the test's.
		cmd.Args = append(cmd.Args, "--leader-elect", "--state-store", "kubernetes", "--namespace", s.ns)
		cmd.Env = append(os.Environ(), "POD_NAME=sluice-0", "POD_NAMESPACE="+s.ns)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = s.log, io.MultiWriter(s.log, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); pw.Close(); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("sluice log (last 40 lines):\n%s", testkit.LastLines(s.log.String(), 40))
		}
	})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, HTTP string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "sluice running" {
				s.httpAddr.Store(&line.HTTP)
			}
		}
	}()
}

// rolloutStatus is the part of the API's RolloutStatus the tests read.
type rolloutStatus struct {
	Phase         string `json:"phase"`
	Message       string `json:"message"`
	StableVersion string `json:"stableVersion"`
}

// status is rollout name's status from sluice's API.
func (s *scenario) status(name string) (rolloutStatus, error) {
	var st rolloutStatus
	addr := s.httpAddr.Load()
	if addr == nil {
		return st, errors.New("sluice not serving yet")
	}
	resp, err := http.Get("http://" + *addr + "/api/v1/rollouts/" + s.ns + "/" + name)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// pushV2WhenStable pushes v2 once v1 is Healthy (it may never be, when
// a rule is missing: then nothing is pushed), until ctx ends. A failed
// push is written into the log the test shows when it fails.
func (s *scenario) pushV2WhenStable(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond) // polls sluice's API
	defer tick.Stop()
	for {
		if st, err := s.status("kr"); err == nil && st.Phase == "Healthy" && st.StableVersion == v1Image {
			if err := s.repo.push("v2", map[string]string{"kr.yaml": krRollout(s.ns, v2Image)}); err != nil {
				fmt.Fprintf(s.log, "charttest: push v2: %v\n", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// waitPromoted waits for v2 to be stable, its ReplicaSet's pods to carry
// sluice's labels, the stable Service pinned to it, and v1's ReplicaSet
// to be deleted (revisionHistoryLimit 0).
func (s *scenario) waitPromoted(t *testing.T) {
	t.Helper()
	kubetest.Eventually(t, waitLong, "v2 promoted", func() (bool, string) {
		st, err := s.status("kr")
		if err != nil {
			return false, err.Error()
		}
		return st.Phase == "Healthy" && st.StableVersion == v2Image, fmt.Sprintf("%+v", st)
	})
	kubetest.Eventually(t, waitLong, "v1's adopted ReplicaSet deleted past the history", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := s.c.Client.AppsV1().ReplicaSets(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "sluice.io/rollout=kr"})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, rs := range list.Items {
			names = append(names, rs.Name)
		}
		return !slices.Contains(names, "kr-legacy") && len(names) == 1, fmt.Sprintf("ReplicaSets %v", names)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc, err := s.c.Client.CoreV1().Services(s.ns).Get(ctx, "kr-stable", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector["rollouts-pod-template-hash"] == "" {
		t.Errorf("stable Service selector %v not pinned to a pod-template hash", svc.Spec.Selector)
	}
}

// waitUnschedulableReported waits for kx's pod to be marked
// PodScheduled=False, as kube-scheduler does.
func (s *scenario) waitUnschedulableReported(t *testing.T) {
	t.Helper()
	kubetest.Eventually(t, waitLong, "kx's pod reported unschedulable", s.unschedulableReported)
}

// unschedulableReported says whether a pod of kx is PodScheduled=False.
func (s *scenario) unschedulableReported() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=kx"})
	if err != nil {
		return false, err.Error()
	}
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
	}
	return false, fmt.Sprintf("%d kx pods, none PodScheduled=False", len(pods.Items))
}

// refusals are sluice's log lines where the apiserver refused its
// ServiceAccount something. Other refusals (events into a namespace being
// deleted) do not name the account and are not about the role.
func (s *scenario) refusals() string {
	var out []string
	account := "system:serviceaccount:" + s.ns + ":" + s.sa
	for _, l := range strings.Split(s.log.String(), "\n") {
		if strings.Contains(l, account) && strings.Contains(l, " cannot ") {
			out = append(out, strings.ReplaceAll(l, `\"`, `"`))
		}
	}
	return strings.Join(out, "\n")
}

// syncBuffer is a bytes.Buffer safe for the process's two writers and the
// test's readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
