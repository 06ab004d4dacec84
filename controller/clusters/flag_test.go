package clusters

import (
	"maps"
	"strings"
	"testing"
)

func TestParseFlag(t *testing.T) {
	good := []struct {
		in   string
		want Spec
	}{
		{"eu-1=/etc/k/eu1.yaml", Spec{Name: "eu-1", Kubeconfig: "/etc/k/eu1.yaml"}},
		{"eu-1=/etc/k/eu1.yaml,region=eu,tier=prod", Spec{Name: "eu-1", Kubeconfig: "/etc/k/eu1.yaml", Labels: map[string]string{"region": "eu", "tier": "prod"}}},
		{"us=k.yaml,topology.kubernetes.io/region=us-east-1,canary=", Spec{Name: "us", Kubeconfig: "k.yaml", Labels: map[string]string{"topology.kubernetes.io/region": "us-east-1", "canary": ""}}},
		{"home=/etc/k/home.yaml", Spec{Name: "home", Kubeconfig: "/etc/k/home.yaml"}}, // allowed here; Load checks it points at home
	}
	for _, tc := range good {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseFlag(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || got.Kubeconfig != tc.want.Kubeconfig || !maps.Equal(got.Labels, tc.want.Labels) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}

	bad := []struct {
		in   string
		want []string // each in the error
	}{
		{"", []string{`--cluster ""`, "want NAME=KUBECONFIG"}},
		{"eu-1", []string{`--cluster "eu-1"`, "want NAME=KUBECONFIG"}},
		{"eu-1=", []string{"want NAME=KUBECONFIG"}},
		{"=/k.yaml", []string{"want NAME=KUBECONFIG"}},
		{",region=eu", []string{"want NAME=KUBECONFIG"}},
		{"EU_1=/k.yaml", []string{`--cluster "EU_1=/k.yaml"`, `cluster name "EU_1"`, "RFC 1123"}},
		{"eu.1=/k.yaml", []string{`cluster name "eu.1"`}},
		{strings.Repeat("a", 64) + "=/k.yaml", []string{"cluster name", "63"}},
		{"eu-1=/k.yaml,region", []string{`--cluster "eu-1=/k.yaml,region"`, `label "region": want key=value`}},
		{"eu-1=/k.yaml,region=eu,", []string{`label "": want key=value`}},
		{"eu-1=/k.yaml,=eu", []string{`label key ""`}},
		{"eu-1=/k.yaml,-bad=eu", []string{`label key "-bad"`}},
		{"eu-1=/k.yaml,region=eu west", []string{`label region: value "eu west"`}},
		{"eu-1=/k.yaml,region=eu,region=us", []string{"label region given twice"}},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.in, func(t *testing.T) {
			_, err := ParseFlag(tc.in)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
