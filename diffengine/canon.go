package diffengine

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
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

// rolloutTrees builds the canonical trees of two versions of a rollout:
// metadata labels and the Argo spec. Only what differs is converted: the
// walk descends through structs field by field and skips every field that
// is reflect.DeepEqual on both sides, so an image change costs one
// container list, not two whole pod templates. Equal parts are absent from
// both trees, so they never show as changes.
func rolloutTrees(old, new *api.Rollout) (a, b map[string]any) {
	a, b = map[string]any{}, map[string]any{}
	if !maps.Equal(old.Labels, new.Labels) {
		a["metadata"] = map[string]any{"labels": stringMap(old.Labels)}
		b["metadata"] = map[string]any{"labels": stringMap(new.Labels)}
	}
	// Addressable roots, so that DeepEqual below compares through pointers
	// instead of copying every struct field into an interface.
	sa, sb := partialTrees(reflect.ValueOf(&old.Spec).Elem(), reflect.ValueOf(&new.Spec).Elem())
	for _, pair := range [2]struct {
		dst  map[string]any
		spec any
	}{{a, sa}, {b, sb}} {
		if m, ok := pair.spec.(map[string]any); ok {
			normaliseRolloutSpec(m)
		}
		pair.dst["spec"] = pair.spec
	}
	return a, b
}

func pruneRoot(t map[string]any) map[string]any {
	out, _ := prune(t, false).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// partialTrees converts the parts of a and b (same type) that differ.
func partialTrees(a, b reflect.Value) (any, any) {
	t := a.Type()
	if t.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil() && !t.Implements(marshalerType) {
		return partialTrees(a.Elem(), b.Elem())
	}
	// encoding/json calls pointer-receiver MarshalJSON methods only on
	// addressable values, which values reached through an interface never
	// are, so only value-receiver marshalers (Quantity, Time, IntOrString)
	// are leaves here, exactly as in toTree.
	if t.Kind() != reflect.Struct || t.Implements(marshalerType) {
		// Leaves are pruned here; the maps above them are scaffolding that
		// stays even when empty, so that a field added under an absent
		// parent shows at its own path, not as the whole spec being added.
		return prune(toTree(a.Interface()), false), prune(toTree(b.Interface()), false)
	}
	ma, mb := map[string]any{}, map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(f)
		if name == "" {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		if deepEqual(fa, fb) {
			continue
		}
		ca, cb := partialTrees(fa, fb)
		if f.Anonymous && !hasJSONName(f) {
			// An embedded struct without a name is inlined by encoding/json.
			maps.Copy(ma, asMap(ca))
			maps.Copy(mb, asMap(cb))
			continue
		}
		if ca != nil {
			ma[name] = ca
		}
		if cb != nil {
			mb[name] = cb
		}
	}
	return ma, mb
}

// deepEqual is reflect.DeepEqual on two values of one type, through their
// addresses when they have one.
func deepEqual(a, b reflect.Value) bool {
	if a.CanAddr() && b.CanAddr() {
		return reflect.DeepEqual(a.Addr().Interface(), b.Addr().Interface())
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func hasJSONName(f reflect.StructField) bool {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name != ""
}

// jsonName is a struct field's JSON key, "" for fields JSON skips.
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" || !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

// templateTree is the canonical tree of an analysis template.
func templateTree(t *api.AnalysisTemplate) map[string]any {
	spec := toTree(t.Spec)
	if m, ok := spec.(map[string]any); ok {
		normaliseTemplateSpec(m)
	}
	return pruneRoot(map[string]any{"spec": spec})
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

// stepKind reports the step kind of a map that looks like a canary step:
// every key names a step type (Argo allows several types in one step, see
// api.Step). The kind is the first key in sorted order.
func stepKind(m map[string]any) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	kinds := slices.Sorted(maps.Keys(m))
	for _, k := range kinds {
		switch api.StepKind(k) {
		case api.StepSetWeight, api.StepPause, api.StepAnalysis, api.StepSetHeaderRoute,
			api.StepSetMirrorRoute, api.StepSetCanaryScale:
			continue
		}
		if k != "experiment" && k != "plugin" {
			return "", false
		}
	}
	return kinds[0], true
}
