package charttest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The image itself cannot be built here (no container runtime, no
// registry to pull the base images from). These tests hold the
// Dockerfile to what the chart relies on instead: its build step, run as
// written, makes a static binary that knows its version; the image runs
// as the user the chart's securityContext names; it exposes the chart's
// ports.

// dockerfile parses the repository's Dockerfile with BuildKit's own
// parser, into its build stages.
func dockerfile(t *testing.T) []instructions.Stage {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ast, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages; want a build stage and the image", len(stages))
	}
	return stages
}

// TestDockerfileBuildsAStaticBinary runs the build stage's `go build`
// exactly as the Dockerfile writes it (only its output path moved into a
// temporary directory) and checks the result: a statically linked ELF
// (no interpreter, so distroless/static can run it) that reports the
// VERSION build argument.
func TestDockerfileBuildsAStaticBinary(t *testing.T) {
	var build string
	for _, c := range dockerfile(t)[0].Commands {
		if run, ok := c.(*instructions.RunCommand); ok && strings.Contains(strings.Join(run.CmdLine, " "), "go build") {
			build = strings.Join(run.CmdLine, " ")
		}
	}
	if build == "" {
		t.Fatal("Dockerfile: the build stage has no RUN with go build")
	}
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile: %q does not set CGO_ENABLED=0; the image has no libc", build)
	}
	out := filepath.Join(t.TempDir(), "sluice")
	if !strings.Contains(build, "/out/sluice") {
		t.Fatalf("Dockerfile: %q does not write /out/sluice, which the image copies", build)
	}
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(build, "/out/sluice", out))
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "VERSION=9.8.7-test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, b)
	}
	bin, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader (PT_INTERP): it is not static")
		}
	}
	if libs, _ := bin.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	v, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(v)); got != "sluice 9.8.7-test" {
		t.Errorf("sluice version = %q; want the VERSION build argument, sluice 9.8.7-test", got)
	}
}

// TestDockerfileMatchesChart: the image's user is the one the chart runs
// as (runAsNonRoot needs a numeric user), and it exposes the ports the
// chart's container declares.
func TestDockerfileMatchesChart(t *testing.T) {
	stages := dockerfile(t)
	image := stages[len(stages)-1]
	var user string
	var exposed []string
	for _, c := range image.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.ExposeCommand:
			exposed = append(exposed, c.Ports...)
		}
	}
	r, err := render(t, "sluice-system", loadValues(t, "values-default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pod map[string]any
	for _, obj := range decodeManifest(t, r.Manifest) {
		if obj.GetKind() == "Deployment" {
			pod, _, _ = unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		}
	}
	if pod == nil {
		t.Fatal("the chart renders no Deployment")
	}
	uid := number(t, pod, "securityContext", "runAsUser")
	gid := number(t, pod, "securityContext", "runAsGroup")
	if want := formatIDs(uid, gid); user != want {
		t.Errorf("Dockerfile USER %q; the chart runs as %s", user, want)
	}
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	var ports []string
	for _, c := range containers {
		ps, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
		for _, p := range ps {
			ports = append(ports, formatInt(number(t, p.(map[string]any), "containerPort")))
		}
	}
	slices.Sort(ports)
	slices.Sort(exposed)
	if !slices.Equal(ports, exposed) {
		t.Errorf("Dockerfile EXPOSE %v; the chart's container ports are %v", exposed, ports)
	}
}

// number reads a whole number from a decoded manifest, where JSON made
// every number a float64.
func number(t *testing.T, obj map[string]any, fields ...string) int64 {
	t.Helper()
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	t.Fatalf("%v: %v (found %v) is not a number", fields, v, ok)
	return 0
}

func formatIDs(uid, gid int64) string { return formatInt(uid) + ":" + formatInt(gid) }

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
