package diffengine

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// A canonical tree is the JSON data model (map[string]any, []any, string,
// float64, bool) of an object, with Argo's defaults removed and equivalent
// spellings (30 vs "30s", "1" vs 1) normalised, so that two trees are equal
// exactly when the objects mean the same thing.

// rolloutTree is the canonical tree of a rollout: metadata labels and
// annotations, and the whole Argo spec.
func rolloutTree(r *api.Rollout) map[string]any {
	t := map[string]any{}
	meta := map[string]any{}
	if len(r.Labels) > 0 {
		meta["labels"] = stringMap(r.Labels)
	}
	if len(meta) > 0 {
		t["metadata"] = meta
	}
	spec := toTree(r.Spec)
	if m, ok := spec.(map[string]any); ok {
		normaliseRolloutSpec(m)
	}
	t["spec"] = spec
	return prune(t, false).(map[string]any)
}

// templateTree is the canonical tree of an analysis template.
func templateTree(t *api.AnalysisTemplate) map[string]any {
	spec := toTree(t.Spec)
	if m, ok := spec.(map[string]any); ok {
		normaliseTemplateSpec(m)
	}
	out, _ := prune(map[string]any{"spec": spec}, false).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// toTree turns a typed value into JSON data. The typed Argo structs always
// marshal; if one somehow does not, the error text stands in for the value so
// that the difference still shows instead of vanishing.
func toTree(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return "<unreadable: " + err.Error() + ">"
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return "<unreadable: " + err.Error() + ">"
	}
	return out
}

func child(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

func list(m map[string]any, key string) []any {
	if m == nil {
		return nil
	}
	l, _ := m[key].([]any)
	return l
}

// dropIf deletes m[key] when it equals one of the defaults.
func dropIf(m map[string]any, key string, defaults ...any) {
	if m == nil {
		return
	}
	v, ok := m[key]
	if !ok {
		return
	}
	for _, d := range defaults {
		if v == d {
			delete(m, key)
			return
		}
	}
}

func normaliseRolloutSpec(spec map[string]any) {
	dropIf(spec, "replicas", 1.0)
	dropIf(spec, "revisionHistoryLimit", 10.0)
	dropIf(spec, "progressDeadlineSeconds", 600.0)
	normalisePodTemplate(child(spec, "template"))

	canary := child(spec, "strategy", "canary")
	if canary == nil {
		return
	}
	for _, k := range []string{"maxSurge", "maxUnavailable"} {
		normaliseIntOrString(canary, k)
		dropIf(canary, k, "25%", "25", 25.0)
	}
	for _, s := range list(canary, "steps") {
		step, _ := s.(map[string]any)
		if p := child(step, "pause"); p != nil {
			if d, ok := p["duration"]; ok {
				p["duration"] = normaliseSeconds(d)
			}
			dropIf(p, "duration", "0s")
		}
		if a := child(step, "analysis"); a != nil {
			normaliseAnalysisRef(a)
		}
	}
	if a := child(canary, "analysis"); a != nil {
		normaliseAnalysisRef(a)
		dropIf(a, "startingStep", 0.0)
	}
	if x := child(canary, "trafficRouting", "plugins", api.XDSPluginName); x != nil {
		dropIf(x, "maxUnapprovedWeightJump", 0.0, float64(api.DefaultMaxUnapprovedWeightJump))
		// Endpoint addresses are a set: their order means nothing to EDS.
		if eps := child(x, "endpoints"); eps != nil {
			for _, addrs := range eps {
				if l, ok := addrs.([]any); ok {
					sortScalars(l)
				}
			}
		}
	}
}

// normaliseAnalysisRef drops defaults of an analysis reference (a step's or
// the background analysis).
func normaliseAnalysisRef(a map[string]any) {
	for _, t := range list(a, "templates") {
		dropIf(asMap(t), "clusterScope", false)
	}
}

func normalisePodTemplate(tpl map[string]any) {
	if tpl == nil {
		return
	}
	if meta := child(tpl, "metadata"); meta != nil {
		delete(meta, "creationTimestamp")
	}
	pod := child(tpl, "spec")
	if pod == nil {
		return
	}
	dropIf(pod, "restartPolicy", "Always")
	dropIf(pod, "dnsPolicy", "ClusterFirst")
	dropIf(pod, "schedulerName", "default-scheduler")
	dropIf(pod, "terminationGracePeriodSeconds", 30.0)
	for _, key := range []string{"containers", "initContainers"} {
		for _, c := range list(pod, key) {
			ctr := asMap(c)
			if ctr == nil {
				continue
			}
			dropIf(ctr, "terminationMessagePath", "/dev/termination-log")
			dropIf(ctr, "terminationMessagePolicy", "File")
			if img, ok := ctr["image"].(string); ok {
				dropIf(ctr, "imagePullPolicy", defaultPullPolicy(img))
			}
			for _, p := range list(ctr, "ports") {
				dropIf(asMap(p), "protocol", "TCP")
			}
		}
	}
}

// defaultPullPolicy is Kubernetes' default: Always for :latest or untagged
// images, IfNotPresent otherwise.
func defaultPullPolicy(image string) string {
	if strings.Contains(image, "@") {
		return "IfNotPresent"
	}
	name := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(name, ":")
	if i < 0 || name[i+1:] == "latest" {
		return "Always"
	}
	return "IfNotPresent"
}

func normaliseTemplateSpec(spec map[string]any) {
	for _, m := range list(spec, "metrics") {
		metric := asMap(m)
		if metric == nil {
			continue
		}
		for _, k := range []string{"interval", "initialDelay"} {
			if d, ok := metric[k].(string); ok {
				metric[k] = normaliseDuration(d)
			}
			dropIf(metric, k, "0s")
		}
		for _, k := range []string{"count", "failureLimit", "inconclusiveLimit", "consecutiveErrorLimit", "consecutiveSuccessLimit"} {
			normaliseIntOrString(metric, k)
		}
		dropIf(metric, "count", 0.0)
		dropIf(metric, "failureLimit", 0.0)
		dropIf(metric, "inconclusiveLimit", 0.0)
		dropIf(metric, "consecutiveSuccessLimit", 0.0)
		dropIf(metric, "consecutiveErrorLimit", 4.0)
		if web := child(metric, "provider", "web"); web != nil {
			dropIf(web, "method", "GET")
			dropIf(web, "timeoutSeconds", 10.0)
		}
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// normaliseIntOrString turns "3" into 3 so both spellings compare equal.
func normaliseIntOrString(m map[string]any, key string) {
	s, ok := m[key].(string)
	if !ok {
		return
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		m[key] = float64(n)
	}
}

// normaliseSeconds reads an Argo pause duration: an integer (or a string of
// digits) is seconds, anything else a Go duration. Unreadable values are
// kept as written.
func normaliseSeconds(v any) any {
	switch d := v.(type) {
	case float64:
		return (time.Duration(d) * time.Second).String()
	case string:
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			return (time.Duration(n) * time.Second).String()
		}
		return normaliseDuration(d)
	}
	return v
}

func normaliseDuration(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return d.String()
}

// sortScalars sorts a list of strings (other lists are left alone).
func sortScalars(l []any) {
	for _, v := range l {
		if _, ok := v.(string); !ok {
			return
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].(string) < l[j].(string) })
}

// prune removes nulls, empty maps and empty lists bottom up, so that an
// omitted field and an explicitly empty one compare equal. The children of a
// step are kept even when empty: `pause: {}` is a step of its own.
func prune(v any, keepEmpty bool) any {
	switch t := v.(type) {
	case map[string]any:
		_, isStep := stepKind(t)
		for k, c := range t {
			pc := prune(c, isStep)
			if pc == nil {
				delete(t, k)
				continue
			}
			t[k] = pc
		}
		if len(t) == 0 && !keepEmpty {
			return nil
		}
		return t
	case []any:
		out := t[:0]
		for _, c := range t {
			// An element that prunes away entirely is kept as an empty map:
			// dropping it would shift every later index.
			pc := prune(c, true)
			if pc == nil {
				pc = map[string]any{}
			}
			out = append(out, pc)
		}
		if len(out) == 0 && !keepEmpty {
			return nil
		}
		return out
	case nil:
		return nil
	}
	return v
}

// stepKind reports the step kind of a map that looks like a canary step: a
// single key naming one of the step kinds.
func stepKind(m map[string]any) (string, bool) {
	if len(m) != 1 {
		return "", false
	}
	for k := range m {
		switch api.StepKind(k) {
		case api.StepSetWeight, api.StepPause, api.StepAnalysis, api.StepSetHeaderRoute,
			api.StepSetMirrorRoute, api.StepSetCanaryScale:
			return k, true
		}
		switch k {
		case "experiment", "plugin":
			return k, true
		}
	}
	return "", false
}
