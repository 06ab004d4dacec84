package clusters

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Spec is one --cluster flag value, parsed and checked; Load reads its
// kubeconfig.
type Spec struct {
	Name       string
	Kubeconfig string // path of the kubeconfig file (its current context)
	Labels     map[string]string
}

// source names the flag in errors and status.
func (s Spec) source() string { return "--cluster " + s.Name }

// ParseFlag parses `NAME=KUBECONFIG[,key=value...]`, e.g.
// `eu-1=/etc/k/eu1.yaml,region=eu,tier=prod`. NAME is a DNS-1123 label
// (it appears in sub-rollout keys and label values); the labels follow
// Kubernetes' label syntax, since sluice.io/clusters selects over them.
// The kubeconfig path cannot contain a comma.
func ParseFlag(s string) (Spec, error) {
	head, labelList, _ := strings.Cut(s, ",")
	name, path, ok := strings.Cut(head, "=")
	if !ok || name == "" || path == "" {
		return Spec{}, fmt.Errorf("--cluster %q: want NAME=KUBECONFIG[,key=value...], e.g. eu-1=/etc/sluice/eu-1.yaml,region=eu", s)
	}
	if err := checkName(name); err != nil {
		return Spec{}, fmt.Errorf("--cluster %q: %w", s, err)
	}
	spec := Spec{Name: name, Kubeconfig: path}
	if labelList != "" {
		labels, err := parseLabels(labelList)
		if err != nil {
			return Spec{}, fmt.Errorf("--cluster %q: %w", s, err)
		}
		spec.Labels = labels
	}
	return spec, nil
}

// checkName refuses a cluster name that is not a DNS-1123 label.
func checkName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("cluster name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// parseLabels parses "key=value,key=value" with Kubernetes' label rules.
func parseLabels(list string) (map[string]string, error) {
	labels := map[string]string{}
	for pair := range strings.SplitSeq(list, ",") {
		key, value, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want key=value", pair)
		}
		if errs := content.IsLabelKey(key); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", key, strings.Join(errs, "; "))
		}
		if errs := content.IsLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("label %s: value %q: %s", key, value, strings.Join(errs, "; "))
		}
		if _, dup := labels[key]; dup {
			return nil, fmt.Errorf("label %s given twice", key)
		}
		labels[key] = value
	}
	return labels, nil
}
