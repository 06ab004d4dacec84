package clusters

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// A second apiserver would cost a control plane per test; a CutProxy in
// front of the shared one has a URL of its own, and Load tells clusters
// apart by URL, so it stands for another cluster here.
func proxyServer(t *testing.T) string {
	c := kubetest.Shared(t)
	return "https://" + kubetest.NewCutProxy(t, strings.TrimPrefix(c.Config.Host, "https://")).Addr()
}

func limit(cfg *rest.Config) { cfg.QPS, cfg.Burst = 42, 84 }

func mustFlag(t *testing.T, s string) Spec {
	t.Helper()
	spec, err := ParseFlag(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// summary is what a test compares: name, home, labels, server, source.
func summary(cs []Cluster) []string {
	var out []string
	for _, c := range cs {
		labels := make([]string, 0, len(c.Labels))
		for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
			labels = append(labels, k+"="+c.Labels[k])
		}
		home := ""
		if c.Home {
			home = " home"
		}
		out = append(out, c.Name+home+" ["+strings.Join(labels, ",")+"] "+c.Config.Host+" ("+c.Source+")")
	}
	return out
}

func TestLoadFlags(t *testing.T) {
	c := kubetest.Shared(t)
	other := proxyServer(t)
	// The home apiserver spelled with a trailing slash is still home.
	_, atHome := kubeconfig(t, c.Config, c.Config.Host+"/")
	_, atOther := kubeconfig(t, c.Config, other)

	got, err := Load(context.Background(), Options{
		Home:  c.Config,
		Flags: []Spec{mustFlag(t, "eu-2="+atOther+",region=eu"), mustFlag(t, "eu-1="+atHome+",region=eu,tier=prod")},
		Limit: limit,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"eu-1 home [region=eu,tier=prod] " + c.Config.Host + " (--cluster eu-1)",
		"eu-2 [region=eu] " + other + " (--cluster eu-2)",
	}
	if s := summary(got); !slices.Equal(s, want) {
		t.Fatalf("clusters:\n%s\nwant:\n%s", strings.Join(s, "\n"), strings.Join(want, "\n"))
	}
	if got[0].Config != c.Config {
		t.Error("the home cluster does not keep the home connection")
	}
	if got[1].Config.QPS != 42 || got[1].Config.Burst != 84 {
		t.Errorf("eu-2's connection: QPS %v burst %d, want Limit's 42, 84", got[1].Config.QPS, got[1].Config.Burst)
	}

	t.Run("home alone", func(t *testing.T) {
		got, err := Load(context.Background(), Options{Home: c.Config})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"home home [] " + c.Config.Host + " (home)"}
		if s := summary(got); !slices.Equal(s, want) {
			t.Fatalf("clusters %q, want %q", s, want)
		}
	})
}

func TestLoadFlagErrors(t *testing.T) {
	c := kubetest.Shared(t)
	other := proxyServer(t)
	_, atHome := kubeconfig(t, c.Config, c.Config.Host)
	_, atOther := kubeconfig(t, c.Config, other)
	_, atOtherAgain := kubeconfig(t, c.Config, strings.ToUpper(other)+"/")

	tests := []struct {
		name  string
		flags []string
		want  []string
	}{
		{"two entries at home", []string{"a=" + atHome, "b=" + atHome},
			[]string{"--cluster a and --cluster b point at the same apiserver " + c.Config.Host}},
		{"two entries at one apiserver", []string{"a=" + atOther, "b=" + atOtherAgain},
			[]string{"--cluster a and --cluster b point at the same apiserver " + other}},
		{"home is reserved", []string{"home=" + atOther},
			[]string{"--cluster home: the name home is reserved for the home cluster", "points at " + other}},
		{"one name twice", []string{"eu=" + atHome, "eu=" + atOther},
			[]string{"--cluster eu and --cluster eu both name a cluster eu"}},
		{"missing file", []string{"eu=/nonexistent/kubeconfig"},
			[]string{"--cluster eu: kubeconfig /nonexistent/kubeconfig:", "no such file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var specs []Spec
			for _, f := range tc.flags {
				specs = append(specs, mustFlag(t, f))
			}
			_, err := Load(context.Background(), Options{Home: c.Config, Flags: specs})
			wantError(t, err, tc.want...)
		})
	}
}

func TestLoadSecrets(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	other, third := proxyServer(t), proxyServer(t)
	homeKC, _ := kubeconfig(t, c.Config, c.Config.Host)
	otherKC, _ := kubeconfig(t, c.Config, other)
	thirdKC, atThird := kubeconfig(t, c.Config, third)
	fourthKC, _ := kubeconfig(t, c.Config, proxyServer(t))

	create := func(t *testing.T, name string, labelled bool, data map[string]string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
		if labelled {
			s.Labels = map[string]string{SecretLabel: "true"}
		}
		if _, err := c.Client.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(t *testing.T, name string) {
		t.Helper()
		if err := c.Client.CoreV1().Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	load := func(flags ...Spec) ([]Cluster, error) {
		return Load(context.Background(), Options{Home: c.Config, Flags: flags, Client: c.Client, Namespace: ns, Limit: limit})
	}

	create(t, "prod-home", true, map[string]string{"kubeconfig": string(homeKC), "labels": "region=us"})
	create(t, "eu-1", true, map[string]string{"kubeconfig": string(otherKC), "labels": " region=eu,tier=prod\n"})
	create(t, "by-data-name", true, map[string]string{"kubeconfig": string(thirdKC), "name": "ap-1"})
	create(t, "not-a-cluster", false, map[string]string{"kubeconfig": "not even yaml: ["})

	got, err := load()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ap-1 [] " + third + " (secret " + ns + "/by-data-name)",
		"eu-1 [region=eu,tier=prod] " + other + " (secret " + ns + "/eu-1)",
		"prod-home home [region=us] " + c.Config.Host + " (secret " + ns + "/prod-home)",
	}
	if s := summary(got); !slices.Equal(s, want) {
		t.Fatalf("clusters:\n%s\nwant:\n%s", strings.Join(s, "\n"), strings.Join(want, "\n"))
	}

	t.Run("a flag and a secret with one name", func(t *testing.T) {
		_, err := load(mustFlag(t, "eu-1="+atThird))
		// ap-1 is on third too: the apiserver clash is found first.
		wantError(t, err, "--cluster eu-1 and secret "+ns+"/by-data-name point at the same apiserver "+third)
		_, otherFile := kubeconfig(t, c.Config, proxyServer(t))
		_, err = load(mustFlag(t, "eu-1="+otherFile))
		wantError(t, err, "--cluster eu-1 and secret "+ns+"/eu-1 both name a cluster eu-1")
	})

	bad := []struct {
		secret string
		data   map[string]string
		want   string
	}{
		{"no-kubeconfig", map[string]string{"name": "x"}, "data.kubeconfig: missing"},
		{"garbage", map[string]string{"kubeconfig": "not even yaml: ["}, "data.kubeconfig:"},
		{"bad-name", map[string]string{"kubeconfig": string(otherKC), "name": "Bad_Name"}, `data.name (default: the Secret's name): cluster name "Bad_Name"`},
		{"dotted.name", map[string]string{"kubeconfig": string(otherKC)}, `cluster name "dotted.name"`},
		{"bad-labels", map[string]string{"kubeconfig": string(otherKC), "name": "z", "labels": "region"}, `data.labels: label "region": want key=value`},
		{"token-file", map[string]string{"kubeconfig": strings.Replace(string(otherKC), "{token:", "{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token, token:", 1)}, "tokenFile is a file path"},
		{"exec", map[string]string{"kubeconfig": strings.Replace(string(otherKC), "{token:", "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, interactiveMode: Never}, token:", 1)}, "exec plugins are not run from cluster Secrets"},
		{"ca-file", map[string]string{"kubeconfig": strings.Replace(string(otherKC), "insecure-skip-tls-verify: true", "certificate-authority: /etc/ca.crt", 1)}, "certificate-authority is a file path"},
		{"home", map[string]string{"kubeconfig": string(fourthKC)}, "the name home is reserved for the home cluster"},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.secret, func(t *testing.T) {
			create(t, tc.secret, true, tc.data)
			defer remove(t, tc.secret)
			_, err := load()
			wantError(t, err, "secret "+ns+"/"+tc.secret+": ", tc.want)
		})
	}
}

func wantError(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
