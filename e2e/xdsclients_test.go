package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// The xDS client implementations of the conformance suite
// (conformance_test.go): grpc-go in this process, gRPC C-core through
// Python's grpcio and grpc-js with @grpc/grpc-js-xds on Node.js, each a
// real xDS client bootstrapped to sluice, driven through one interface.

// observed is what one batch of calls observed: answers per version and
// failures per "CODE: message".
type observed struct {
	Versions map[string]int `json:"versions"`
	Errors   map[string]int `json:"errors"`
}

func (t observed) answered() int {
	n := 0
	for _, c := range t.Versions {
		n += c
	}
	return n
}

func (t observed) failed() int {
	n := 0
	for _, c := range t.Errors {
		n += c
	}
	return n
}

// share is the fraction of all calls (failed ones included) version answered.
func (t observed) share(version string) float64 {
	if n := t.answered() + t.failed(); n > 0 {
		return float64(t.Versions[version]) / float64(n)
	}
	return 0
}

func (t observed) String() string {
	return fmt.Sprintf("versions %v errors %v", t.Versions, t.Errors)
}

// xdsClient is one running client process (or, for grpc-go, channel) of
// one implementation, dialed to xds:///<host>.
type xdsClient interface {
	// call makes n calls carrying the metadata and reports what answered.
	call(t *testing.T, n int, md map[string]string) observed
	// firstCall is the time from creating the channel to the first call
	// answered, xDS resolution included.
	firstCall() time.Duration
}

// clientImpl is one xDS client implementation under test.
type clientImpl struct {
	name string
	// mirrors says whether the implementation copies requests to a
	// route's request_mirror_policies; the suite checks it both ways.
	mirrors bool
	// start runs a client of host with the given xDS bootstrap
	// (probe.Bootstrap and its kin).
	start func(t *testing.T, bootstrap []byte, host string) xdsClient
}

// callTimeout bounds one call; calls wait for a ready route meanwhile.
const callTimeout = 5 * time.Second

// ---- grpc-go, in this process ----

// goClient is a grpc-go channel with its own xDS client and bootstrap.
type goClient struct {
	cc    *grpc.ClientConn
	first time.Duration
}

func startGoClient(t *testing.T, bootstrap []byte, host string) xdsClient {
	t.Helper()
	rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cc, err := grpc.NewClient("xds:///"+host, grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, err := probe.Call(ctx, cc)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("grpc-go: no call answered within 60s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &goClient{cc: cc, first: time.Since(start)}
}

func (c *goClient) firstCall() time.Duration { return c.first }

func (c *goClient) call(t *testing.T, n int, md map[string]string) observed {
	var pairs []string
	for k, v := range md {
		pairs = append(pairs, k, v)
	}
	res := observed{Versions: map[string]int{}, Errors: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // calls in flight, as the other clients
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			v, err := probe.Call(ctx, c.cc, pairs...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s := status.Convert(err)
				res.Errors[s.Code().String()+": "+s.Message()]++
				return
			}
			res.Versions[v]++
		}()
	}
	wg.Wait()
	return res
}

// ---- other languages, as processes speaking JSON lines ----

// procClient is a client program (e2e/testdata/xdsclients/client.*) that
// reads one JSON command a line on stdin and answers with one JSON line.
type procClient struct {
	name  string
	in    io.WriteCloser
	lines chan string
	log   *testkit.SyncBuffer // its stderr
	first time.Duration
}

// startProcClient runs argv (the host is appended) with GRPC_XDS_BOOTSTRAP
// naming a file that holds bootstrapJSON, and waits for its first answered
// call.
func startProcClient(t *testing.T, name string, argv, env []string, bootstrapJSON []byte, host string) *procClient {
	t.Helper()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(bootstrap, bootstrapJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], append(argv[1:], host)...)
	cmd.Env = append(append(os.Environ(), "GRPC_XDS_BOOTSTRAP="+bootstrap), env...)
	c := &procClient{name: name, lines: make(chan string, 1), log: &testkit.SyncBuffer{}}
	cmd.Stderr = c.log
	var err error
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		c.in.Close() // the client exits at the end of its input
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s stderr (last 30 lines):\n%s", name, testkit.LastLines(c.log.String(), 30))
		}
	})
	var ready struct {
		Ready      bool    `json:"ready"`
		Version    string  `json:"version"`
		FirstMS    float64 `json:"first_call_ms"`
		FirstError string  `json:"first_error"`
	}
	c.read(t, 90*time.Second, &ready)
	if !ready.Ready {
		t.Fatalf("%s: no call answered within 60s; last error %q", name, ready.FirstError)
	}
	c.first = time.Duration(ready.FirstMS * float64(time.Millisecond))
	return c
}

// read decodes the next line into v.
func (c *procClient) read(t *testing.T, timeout time.Duration, v any) {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			t.Fatalf("%s exited:\n%s", c.name, testkit.LastLines(c.log.String(), 30))
		}
		if err := json.Unmarshal([]byte(line), v); err != nil {
			t.Fatalf("%s said %q: %v", c.name, line, err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s did not answer within %v:\n%s", c.name, timeout, testkit.LastLines(c.log.String(), 30))
	}
}

func (c *procClient) firstCall() time.Duration { return c.first }

func (c *procClient) call(t *testing.T, n int, md map[string]string) observed {
	t.Helper()
	cmd, err := json.Marshal(map[string]any{"cmd": "call", "n": n, "metadata": md, "timeout_ms": callTimeout.Milliseconds()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.in.Write(append(cmd, '\n')); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	var res observed
	c.read(t, 120*time.Second, &res)
	return res
}

// debianPython is Debian's interpreter, whose python3-grpcio is the C-core
// under test; a `python3` earlier on PATH (pyenv) may have no grpc at all.
const debianPython = "/usr/bin/python3"

// pythonGRPC is the grpcio version python imports, or "" without one.
func pythonGRPC(python string) string {
	out, err := exec.Command(python, "-c", "import grpc; print(grpc.__version__)").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// pythonPollEnv shortens grpcio's backup poll. An idle grpcio channel
// (no call in flight: the client waiting on stdin between commands) reads
// its xDS stream only when C-core's backup poller runs, every 5 s by
// default, so each route update reached it 5-10 s late and most steps went
// on after --ack-timeout instead of the ACK (the suite took 73 s for this
// client instead of 9). Routing was right either way; docs/xds.md tells
// operators about the knob.
const pythonPollEnv = "GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS=200"

func pythonClient(python string) func(t *testing.T, bootstrap []byte, host string) xdsClient {
	return func(t *testing.T, bootstrap []byte, host string) xdsClient {
		return startProcClient(t, "python "+python, []string{python, "-u", "testdata/xdsclients/client.py"}, []string{pythonPollEnv}, bootstrap, host)
	}
}

// nodeModules is where hack/xdsclients.sh installed grpc-js and
// @grpc/grpc-js-xds: SLUICE_XDSCLIENTS_NODE_MODULES, or the cache the
// script fills, named after the hash of the committed package-lock.json.
func nodeModules(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("SLUICE_XDSCLIENTS_NODE_MODULES"); dir != "" {
		return dir
	}
	lock, err := os.ReadFile("../hack/xdsclients/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache := os.Getenv("SLUICE_XDSCLIENTS_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "sluice-xdsclients")
	}
	return filepath.Join(cache, hex.EncodeToString(sum[:])[:16], "node_modules")
}

func nodeClient(nodeBin, modules string) func(t *testing.T, bootstrap []byte, host string) xdsClient {
	return func(t *testing.T, bootstrap []byte, host string) xdsClient {
		return startProcClient(t, "grpc-js", []string{nodeBin, "testdata/xdsclients/client.js"}, []string{"NODE_PATH=" + modules}, bootstrap, host)
	}
}

// clientImpls are the implementations the suite runs: all of them, or it
// fails saying what to install (a missing client is a broken test setup,
// not a reason to pass).
func clientImpls(t *testing.T) []clientImpl {
	t.Helper()
	impls := []clientImpl{{name: "grpc-go", start: startGoClient}}

	v := pythonGRPC(debianPython)
	if v == "" {
		t.Fatalf("%s cannot import grpc: install Debian's python3-grpcio (hack/test-deps.sh)", debianPython)
	}
	impls = append(impls, clientImpl{name: "grpc-core-python-" + v, start: pythonClient(debianPython)})
	// A newer grpcio where one is installed (e.g. pip on another python3).
	if other, err := exec.LookPath("python3"); err == nil {
		if resolved, _ := filepath.EvalSymlinks(other); resolved != debianPython {
			if ov := pythonGRPC(other); ov != "" && ov != v {
				impls = append(impls, clientImpl{name: "grpc-core-python-" + ov, start: pythonClient(other)})
			}
		}
	}

	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is missing: install Debian's nodejs (hack/test-deps.sh)")
	}
	modules := nodeModules(t)
	if _, err := os.Stat(filepath.Join(modules, "@grpc", "grpc-js-xds", "package.json")); err != nil {
		t.Fatalf("@grpc/grpc-js-xds is not installed in %s: run hack/xdsclients.sh (or set SLUICE_XDSCLIENTS_NODE_MODULES)", modules)
	}
	impls = append(impls, clientImpl{name: "grpc-js", start: nodeClient(nodeBin, modules)})
	return impls
}

// ---- a proxy that makes a client NACK ----

// nackProxy is an ADS proxy between one xDS client and sluice. sluice only
// serves what passes its own validation, so no real client NACKs it on its
// own; armed, the proxy zeroes every weight in the route tables it passes
// on, which every gRPC client rejects (gRFC A28: a weighted_clusters total
// of 0 is invalid), and the client's NACK travels on to sluice as any
// NACK would. Disarmed it passes everything through unchanged.
type nackProxy struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	upstream string
	addr     string
	armed    atomic.Bool
	broken   atomic.Int64 // route responses broken so far
}

func startNACKProxy(t *testing.T, upstream string) *nackProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &nackProxy{upstream: upstream, addr: lis.Addr().String()}
	srv := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return p
}

func (p *nackProxy) StreamAggregatedResources(down discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	cc, err := grpc.NewClient("passthrough:///"+p.upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "upstream: %v", err)
	}
	errc := make(chan error, 2)
	go func() {
		for {
			req, err := down.Recv()
			if err == nil {
				err = up.Send(req)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		for {
			resp, err := up.Recv()
			if err == nil {
				if p.armed.Load() && resp.GetTypeUrl() == resourcev3.RouteType {
					err = p.breakRoutes(resp)
				}
				if err == nil {
					err = down.Send(resp)
				}
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	err = <-errc
	return status.Errorf(codes.Unavailable, "proxy: %v", err)
}

// breakRoutes sets every cluster weight of every route table in resp to 0.
func (p *nackProxy) breakRoutes(resp *discoveryv3.DiscoveryResponse) error {
	for i, res := range resp.GetResources() {
		var rc routev3.RouteConfiguration
		if err := res.UnmarshalTo(&rc); err != nil {
			return err
		}
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				for _, c := range r.GetRoute().GetWeightedClusters().GetClusters() {
					c.Weight = wrapperspb.UInt32(0)
				}
			}
		}
		a, err := anypb.New(&rc)
		if err != nil {
			return err
		}
		resp.Resources[i] = a
	}
	p.broken.Add(1)
	return nil
}
