package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestLint: `helm lint` (strict: warnings fail too) finds nothing with the
// values a user must give, with every feature on, nor with the state in
// bbolt on a claim.
func TestLint(t *testing.T) {
	for _, file := range []string{"values-default.yaml", "values-full.yaml", "values-bbolt.yaml"} {
		t.Run(file, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = "sluice-system"
			lint.KubeVersion = kubeVersion(t)
			res := lint.Run([]string{chartDir}, loadValues(t, file))
			for _, m := range res.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
			for _, err := range res.Errors {
				t.Errorf("helm lint: %v", err)
			}
		})
	}
}

// TestGolden compares the rendered manifests and notes with
// testdata/golden (go test -update rewrites them; review the diff).
func TestGolden(t *testing.T) {
	for _, name := range []string{"default", "full", "bbolt"} {
		t.Run(name, func(t *testing.T) {
			r, err := render(t, "sluice-system", loadValues(t, "values-"+name+".yaml"))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			got := r.Manifest + "\n---\n# NOTES.txt\n" + commentLines(r.Notes)
			path := filepath.Join("testdata", "golden", name+".yaml")
			if testkit.Updating() {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("rendered chart differs from %s (go test -update rewrites it; review the diff):\n%s", path, firstDifference(string(want), got))
			}
		})
	}
}

// commentLines makes the notes a YAML comment, so the golden stays YAML.
func commentLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("# "+l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// firstDifference shows the first line where want and got part.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, wl, gl)
		}
	}
	return ""
}

// TestRenderRefuses: values that cannot work are refused at install time
// with a message that names the value, not at run time in a crash loop.
func TestRenderRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(v map[string]any)
		want string
	}{
		{"no repository", func(v map[string]any) { v["git"] = map[string]any{} }, "git.repo is required"},
		{"no API token", func(v map[string]any) { v["api"] = map[string]any{} }, "api.existingSecret is required"},
		// Issue 27, K1: the chart served xDS in plaintext on the pod IP.
		{"no xDS certificates", func(v map[string]any) { v["xds"] = map[string]any{} },
			"xds.tls.existingSecret is required (a Secret with keys tls.crt, tls.key and ca.crt"},
		{"xDS certificates and insecure", func(v map[string]any) {
			v["xds"] = map[string]any{"insecure": true, "tls": map[string]any{"existingSecret": "sluice-xds"}}
		}, "xds.tls.existingSecret and xds.insecure exclude each other"},
		{"bbolt with two replicas", func(v map[string]any) { v["stateStore"] = "bbolt" }, "stateStore bbolt keeps state in one pod"},
		{"bbolt with leader election", func(v map[string]any) {
			v["stateStore"], v["replicaCount"] = "bbolt", 1
			v["persistence"] = map[string]any{"create": true}
		}, "stateStore bbolt cannot be used with leader election"},
		{"bbolt without a claim", func(v map[string]any) {
			v["stateStore"], v["replicaCount"], v["leaderElection"] = "bbolt", 1, map[string]any{"enabled": false}
		}, "stateStore bbolt needs a PersistentVolumeClaim for its state: on an emptyDir a restarted pod has no record of its rollouts"},
		{"bbolt with a storage class but no claim", func(v map[string]any) {
			v["stateStore"], v["replicaCount"], v["leaderElection"] = "bbolt", 1, map[string]any{"enabled": false}
			v["persistence"] = map[string]any{"storageClass": "fast-ssd"}
		}, "set persistence.existingClaim to a claim in the release's namespace, or persistence.create=true"},
		{"bbolt with both claims", func(v map[string]any) {
			v["stateStore"], v["replicaCount"], v["leaderElection"] = "bbolt", 1, map[string]any{"enabled": false}
			v["persistence"] = map[string]any{"existingClaim": "sluice-data", "create": true}
		}, "persistence.existingClaim and persistence.create exclude each other"},
		{"claim size without a unit", func(v map[string]any) { v["persistence"] = map[string]any{"size": "2 GB"} }, "size"},
		{"unknown state store", func(v map[string]any) { v["stateStore"] = "etcd" }, "stateStore"},
		{"ssh without a Secret", func(v map[string]any) {
			v["git"].(map[string]any)["auth"] = map[string]any{"type": "ssh"}
		}, "git.auth.existingSecret is required with git.auth.type ssh"},
		{"misspelt value", func(v map[string]any) { v["replicas"] = 3 }, "replicas"},
		{"bad namespace name", func(v map[string]any) { v["watchNamespaces"] = []any{"Shop"} }, "watchNamespaces"},
		{"interval without a unit", func(v map[string]any) { v["git"].(map[string]any)["interval"] = "30" }, "interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := loadValues(t, "values-default.yaml")
			tc.set(vals)
			_, err := render(t, "sluice-system", vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
