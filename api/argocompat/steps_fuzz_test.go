package argocompat

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api"
)

// picker draws choices from fuzz bytes; past the end every choice is 0.
type picker struct{ b []byte }

func (p *picker) pick(n int) int {
	if len(p.b) == 0 {
		return 0
	}
	v := int(p.b[0]) % n
	p.b = p.b[1:]
	return v
}

func oneOf[T any](p *picker, vs ...T) T { return vs[p.pick(len(vs))] }

func ptr[T any](v T) *T { return &v }

// genRollout builds a canary Rollout from fuzz bytes: a valid Kubernetes
// side (selector, pod template, services) and a generated traffic router
// and step list, with valid and invalid values of every step field.
func genRollout(data []byte) *v1alpha1.Rollout {
	p := &picker{b: data}
	canary := &v1alpha1.CanaryStrategy{StableService: "web-stable", CanaryService: "web-canary", TrafficRouting: genRouting(p)}
	for range p.pick(5) {
		canary.Steps = append(canary.Steps, genStep(p))
	}
	return &v1alpha1.Rollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: v1alpha1.RolloutSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "shop/web:v1"}}},
			},
			Strategy: v1alpha1.RolloutStrategy{Canary: canary},
		},
	}
}

func genRouting(p *picker) *v1alpha1.RolloutTrafficRouting {
	xds := json.RawMessage(`{"host":"web.internal","endpoints":{"shop/web:v1":["127.0.0.1:9001"]}}`)
	tr := oneOf(p,
		(*v1alpha1.RolloutTrafficRouting)(nil),
		&v1alpha1.RolloutTrafficRouting{Plugins: map[string]json.RawMessage{"sluice.io/xds": xds}},
		&v1alpha1.RolloutTrafficRouting{Istio: &v1alpha1.IstioTrafficRouting{VirtualService: &v1alpha1.IstioVirtualService{Name: "web"}}},
		&v1alpha1.RolloutTrafficRouting{ALB: &v1alpha1.ALBTrafficRouting{Ingress: "web"}},
		&v1alpha1.RolloutTrafficRouting{Nginx: &v1alpha1.NginxTrafficRouting{StableIngress: "web"}},
	)
	if tr == nil {
		return nil
	}
	tr = tr.DeepCopy()
	tr.ManagedRoutes = oneOf(p, []v1alpha1.MangedRoutes{{Name: "testers"}}, nil, []v1alpha1.MangedRoutes{{Name: "other"}})
	tr.MaxTrafficWeight = oneOf(p, nil, nil, ptr(int32(1000)))
	return tr
}

// genStep sets each step field with some probability, so steps with no
// type, one type and several types all occur.
func genStep(p *picker) v1alpha1.CanaryStep {
	var s v1alpha1.CanaryStep
	if p.pick(3) == 0 {
		s.SetWeight = ptr(oneOf[int32](p, 0, 10, 50, 100, -1, 101, 1000))
	}
	if p.pick(4) == 0 {
		s.Pause = &v1alpha1.RolloutPause{Duration: oneOf(p, nil, ptr(intstr.FromString("30s")), ptr(intstr.FromInt32(0)),
			ptr(intstr.FromInt32(-5)), ptr(intstr.FromString("3x")), ptr(intstr.FromString("3000000000")), ptr(intstr.FromString("-1m")))}
	}
	if p.pick(5) == 0 {
		s.Analysis = &v1alpha1.RolloutAnalysis{Templates: oneOf(p,
			[]v1alpha1.AnalysisTemplateRef{{TemplateName: "success-rate"}}, nil, []v1alpha1.AnalysisTemplateRef{{TemplateName: ""}})}
	}
	if p.pick(12) == 0 {
		s.Experiment = &v1alpha1.RolloutExperimentStep{Templates: []v1alpha1.RolloutExperimentTemplate{{Name: "a", SpecRef: "canary"}}}
	}
	if p.pick(12) == 0 {
		s.Plugin = &v1alpha1.PluginStep{Name: "argoproj-labs/sample"}
	}
	if p.pick(4) == 0 {
		s.SetCanaryScale = oneOf(p, &v1alpha1.SetCanaryScale{Weight: ptr(int32(20))}, &v1alpha1.SetCanaryScale{Replicas: ptr(int32(2))},
			&v1alpha1.SetCanaryScale{MatchTrafficWeight: true}, &v1alpha1.SetCanaryScale{}, &v1alpha1.SetCanaryScale{Weight: ptr(int32(200))})
	}
	if p.pick(3) == 0 {
		s.SetHeaderRoute = &v1alpha1.SetHeaderRoute{Name: oneOf(p, "testers", "other", ""), Match: genHeaderMatch(p)}
	}
	if p.pick(4) == 0 {
		s.SetMirrorRoute = &v1alpha1.SetMirrorRoute{Name: oneOf(p, "testers", "other"), Percentage: oneOf(p, nil, ptr(int32(50)), ptr(int32(150))), Match: genMirrorMatch(p)}
	}
	return s
}

func genHeaderMatch(p *picker) []v1alpha1.HeaderRoutingMatch {
	value := oneOf(p, &v1alpha1.StringMatch{Exact: "yes"}, &v1alpha1.StringMatch{Prefix: "y"}, &v1alpha1.StringMatch{Regex: "y.*"},
		nil, &v1alpha1.StringMatch{}, &v1alpha1.StringMatch{Exact: "yes", Prefix: "y"}, &v1alpha1.StringMatch{Regex: "(?<=a)b"})
	switch p.pick(4) {
	case 0:
		return nil
	case 1:
		return []v1alpha1.HeaderRoutingMatch{{HeaderName: "", HeaderValue: value}}
	case 2:
		return []v1alpha1.HeaderRoutingMatch{{HeaderName: "cookie", HeaderValue: oneOf(p, &v1alpha1.StringMatch{Exact: "beta=1"}, &v1alpha1.StringMatch{Exact: "beta"})}}
	}
	return []v1alpha1.HeaderRoutingMatch{{HeaderName: "x-canary", HeaderValue: value}}
}

func genMirrorMatch(p *picker) []v1alpha1.RouteMatch {
	m := oneOf(p, &v1alpha1.StringMatch{Exact: "GET"}, &v1alpha1.StringMatch{}, &v1alpha1.StringMatch{Exact: "GET", Regex: "P.*"})
	switch p.pick(5) {
	case 0:
		return nil
	case 1:
		return []v1alpha1.RouteMatch{{}}
	case 2:
		return []v1alpha1.RouteMatch{{Method: m}}
	case 3:
		return []v1alpha1.RouteMatch{{Path: m}}
	}
	return []v1alpha1.RouteMatch{{Headers: map[string]v1alpha1.StringMatch{"x-mirror": *m}}}
}

// FuzzStepsAgainstArgo: on generated rollouts, if Argo's validation
// accepts, sluice accepts or every error of sluice's says why sluice
// cannot run the file; if sluice accepts, Argo accepts or sluice warned
// that Argo rejects it. Its seeds (handwritten, then 400 drawn from a
// fixed source) run in every `go test`.
func FuzzStepsAgainstArgo(f *testing.F) {
	f.Add([]byte{})
	// setCanaryScale with setHeaderRoute in one step, sluice's router.
	f.Add([]byte{1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3, 0})
	r := rand.New(rand.NewPCG(18, 3))
	for range 400 {
		b := make([]byte, 64)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data, err := sigsyaml.Marshal(genRollout(data))
		if err != nil {
			t.Fatal(err)
		}
		ro, decodeErr := decodeRollout(data)
		argoErrs := argoVerdict(ro, decodeErr, nil)
		var stubs []byte
		if ro != nil {
			stubs = templatesFor(ro, "r.yaml", nil).sluice
		}
		errs, warns := sluiceVerdict("r.yaml", data, stubs, runsInKubernetes(ro))
		switch {
		case len(argoErrs) == 0 && len(errs) > 0:
			for _, e := range errs {
				if !strings.Contains(e.Message, cannotRunMark) {
					t.Errorf("Argo accepts, sluice rejects without saying it cannot run it: %s\n%s", e, data)
				}
			}
		case len(argoErrs) > 0 && len(errs) == 0 && !hasMark(warns, argoRejectMark):
			t.Errorf("Argo rejects (%v), sluice accepts without a warning:\n%s%s", argoErrs, diagText(warns), data)
		}
	})
}

func hasMark(ds []api.Diagnostic, mark string) bool {
	for _, d := range ds {
		if strings.Contains(d.Message, mark) {
			return true
		}
	}
	return false
}
