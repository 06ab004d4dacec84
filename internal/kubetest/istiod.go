package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// IstiodVersion is the istio.io/istio pseudo-version hack/istiod.sh builds
// (a version checked to build from the module proxy); keep the two in step.
const IstiodVersion = "v0.0.0-20260827124520-eed52ebb66ad"

// IstiodDir is where hack/istiod.sh puts pilot-discovery and Istio's CRDs:
// $SLUICE_ISTIOD_CACHE/<IstiodVersion>, by default under
// $HOME/.cache/kube-controlplane/istiod.
func IstiodDir() string {
	base := os.Getenv("SLUICE_ISTIOD_CACHE")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache", "kube-controlplane", "istiod")
	}
	return filepath.Join(base, IstiodVersion)
}

// Istiod is a real istiod (pilot-discovery) running against a test
// control plane: the Istio and Gateway API implementation of the tests.
// It serves xDS to proxyless gRPC clients in plain text on XDSAddr and
// writes Gateway API route status.
type Istiod struct {
	// XDSAddr is istiod's plaintext xDS address (host:port) for proxyless
	// gRPC clients (node metadata GENERATOR=grpc).
	XDSAddr string
	// Log is istiod's log file.
	Log string

	process *os.Process
	exited  chan struct{}
}

var (
	istiodMu sync.Mutex
	istiods  = map[*Cluster]*Istiod{}
)

// SharedIstiod starts one istiod for c on its first call (every later call
// returns the same one) after installing Istio's and the Gateway API's
// CRDs; it runs until c stops. It fails the test when hack/istiod.sh has
// not built the binary: CI builds it (make test), so skipping would hide a
// broken setup.
func SharedIstiod(t testing.TB, c *Cluster) *Istiod {
	t.Helper()
	istiodMu.Lock()
	defer istiodMu.Unlock()
	if d, ok := istiods[c]; ok {
		return d
	}
	d, err := startIstiod(c)
	if err != nil {
		t.Fatalf("istiod: %v", err)
	}
	istiods[c] = d
	c.onStop(d.stop)
	return d
}

// TailLog returns the last n bytes of istiod's log, for failure messages.
func (d *Istiod) TailLog(n int) string {
	b, _ := os.ReadFile(d.Log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (d *Istiod) stop() {
	_ = d.process.Kill()
	<-d.exited
}

// istiodMeshConfig is the least MeshConfig istiod starts with; the
// discovery address is only what it would tell sidecars.
const istiodMeshConfig = "defaultConfig:\n  discoveryAddress: 127.0.0.1:15012\n"

// istiodMeshNetworks declares no networks: one flat network.
const istiodMeshNetworks = "networks: {}\n"

func startIstiod(c *Cluster) (*Istiod, error) {
	dir := IstiodDir()
	bin := filepath.Join(dir, "pilot-discovery")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s missing: run hack/istiod.sh (make deps; ~25 min the first time)", bin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := installMeshCRDs(ctx, c, filepath.Join(dir, "crd-all.gen.yaml")); err != nil {
		return nil, err
	}
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("namespace istio-system: %w", err)
	}
	work := filepath.Join(c.Dir, "istiod")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	mesh, networks := filepath.Join(work, "mesh.yaml"), filepath.Join(work, "meshNetworks.yaml")
	if err := os.WriteFile(mesh, []byte(istiodMeshConfig), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(networks, []byte(istiodMeshNetworks), 0o644); err != nil {
		return nil, err
	}
	ports, err := testkit.FreePorts(5)
	if err != nil {
		return nil, err
	}
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	logf, err := os.Create(filepath.Join(work, "istiod.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "discovery", "--kubeconfig", c.Kubeconfig,
		"--meshConfig", mesh, "--networksConfig", networks, "--domain", "cluster.local",
		"--keepaliveMaxServerConnectionAge", "30m",
		"--httpAddr", addr(ports[0]), "--grpcAddr", addr(ports[1]), "--secureGRPCAddr", addr(ports[2]),
		"--monitoringAddr", addr(ports[3]), "--httpsAddr", addr(ports[4]), "--ctrlz_port", "0")
	// The three variables only remove side effects (CA secrets and
	// ConfigMaps in every namespace, gateway Deployments, a Lease that
	// outlives a SIGKILL).
	cmd.Env = append(os.Environ(), "ENABLE_CA_SERVER=false",
		"PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &Istiod{XDSAddr: addr(ports[1]), Log: logf.Name(), process: cmd.Process, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.exited) }()
	ready := "http://" + addr(ports[0]) + "/ready"
	for {
		select {
		case <-d.exited:
			return nil, fmt.Errorf("pilot-discovery exited:\n%s", d.TailLog(4000))
		case <-ctx.Done():
			d.stop()
			return nil, fmt.Errorf("not ready within 3m:\n%s", d.TailLog(4000))
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
	}
}

// installMeshCRDs installs every CRD istiod watches: Istio's own (from the
// file hack/istiod.sh copies out of istio.io/istio) and the Gateway API's
// experimental channel (a superset of the standard one, as the routers'
// tests install it).
func installMeshCRDs(ctx context.Context, c *Cluster, istioCRDs string) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(istioCRDs)
	if err != nil {
		return fmt.Errorf("Istio CRDs: %w (hack/istiod.sh copies them)", err)
	}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		if err := applyCRDDoc(ctx, dyn, doc); err != nil {
			return fmt.Errorf("%s: %w", istioCRDs, err)
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return fmt.Errorf("go list sigs.k8s.io/gateway-api: %w", err)
	}
	gwDir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental")
	files, err := filepath.Glob(filepath.Join(gwDir, "gateway.networking.*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if strings.Contains(f, "_vap_") { // a ValidatingAdmissionPolicy, not a CRD
			continue
		}
		if err := ApplyCRDFile(ctx, dyn, f); err != nil {
			return err
		}
	}
	return nil
}

// applyCRDDoc applies one YAML document if it is a CRD.
func applyCRDDoc(ctx context.Context, dyn dynamic.Interface, doc []byte) error {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetKind() != "CustomResourceDefinition" {
		return nil
	}
	return ApplyCRD(ctx, dyn, u)
}
