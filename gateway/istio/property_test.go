package istio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestUnmanagedFieldsByteIdentical is a property test: after any sequence
// of steps (weights, header, cookie and mirror routes, sticky canary,
// pinned stable users),
// aborts, promotions, releases and the user's own edits of fields sluice
// does not manage, every field sluice does not manage is byte-identical,
// as the API server serves it, to what the user last wrote; and after an
// abort, a promotion or a release the VirtualServices' specs are
// byte-identical to the user's, whole.
func TestUnmanagedFieldsByteIdentical(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 14))
			r := newRig(t)
			r.create(t, "virtualservice-subsets.yaml")
			r.create(t, "virtualservice-services.yaml")
			r.create(t, "destinationrule.yaml")
			rt := r.router(t, RouterOptions{})
			routing := subsetRouting()
			routing.Istio.VirtualServices = append(routing.Istio.VirtualServices, api.IstioVirtualService{Name: "checkout-edge"})

			objects := []struct {
				res  schema.GroupVersionResource
				name string
			}{{VirtualServices, "checkout"}, {VirtualServices, "checkout-edge"}, {DestinationRules, "checkout"}}
			// userSpec is the VirtualServices' specs as the user wrote them;
			// want their unmanaged fields (and the DestinationRule's).
			userSpec := map[string][]byte{}
			want := map[string]map[string]string{}
			snapshot := func() {
				for _, o := range objects {
					want[o.res.Resource+"/"+o.name] = unmanaged(t, r.rawJSON(t, o.res, o.name))
				}
			}
			snapshot()
			for _, o := range objects[:2] {
				userSpec[o.name] = jsonPath(t, r.rawJSON(t, o.res, o.name), "spec")
			}

			stable, canary, next := hashV1, hashV2, 3
			tr := canaryTraffic(r.ns, routing, 0, nil)
			var trail []string
			for i := range 30 {
				atRest := false
				switch op := rnd.IntN(9); op {
				case 0, 1:
					tr.Weights = api.CanaryWeights(rnd.Int32N(101))
					trail = append(trail, fmt.Sprintf("weight %d", tr.Weights.Canary))
				case 2:
					tr.HeaderRoutes = toggle(tr.HeaderRoutes, testersRoute)
					trail = append(trail, "toggle header route")
				case 3:
					tr.HeaderRoutes = toggle(tr.HeaderRoutes, cookieRoute)
					trail = append(trail, "toggle cookie route")
				case 4:
					tr.MirrorRoutes = toggle(tr.MirrorRoutes, shadowMirror)
					trail = append(trail, "toggle mirror")
				case 5: // none → sticky canary → stable pinned too → none
					switch tr.SessionAffinity {
					case nil:
						tr.SessionAffinity = stickyCanary
						trail = append(trail, "sticky")
					case stickyCanary:
						tr.SessionAffinity = pinnedStable
						trail = append(trail, "pin stable")
					default:
						tr.SessionAffinity = nil
						trail = append(trail, "no affinity")
					}
				case 6: // abort, or promotion: all on one version, no routes
					if rnd.IntN(2) == 0 {
						trail = append(trail, "abort")
					} else {
						stable = canary
						trail = append(trail, "promote")
					}
					canary = fmt.Sprintf("h%d", next)
					next++
					rest := canaryTraffic(r.ns, routing, 0, func(t *api.Traffic) { t.StableWorkload, t.CanaryWorkload = stable, stable })
					if _, err := rt.Apply(context.Background(), rest); err != nil {
						t.Fatalf("after %v: %v", trail, err)
					}
					tr = canaryTraffic(r.ns, routing, 0, func(t *api.Traffic) { t.StableWorkload, t.CanaryWorkload = stable, canary })
					atRest = true
				case 7:
					trail = append(trail, "release")
					if err := rt.Release(context.Background(), tr.Rollout, routing); err != nil {
						t.Fatalf("after %v: %v", trail, err)
					}
					tr.HeaderRoutes, tr.MirrorRoutes, tr.SessionAffinity, tr.Weights = nil, nil, nil, api.CanaryWeights(0)
					atRest = true
				case 8: // the user edits fields sluice does not manage
					delay := fmt.Sprintf("%dms", 100+i)
					trail = append(trail, "user sets fallback delay "+delay)
					setDelay := func(spec map[string]any) {
						http, _, _ := unstructured.NestedSlice(spec, "http")
						for _, h := range http {
							if routeName(h) == "fallback" {
								_ = unstructured.SetNestedField(h.(map[string]any), delay, "fault", "delay", "fixedDelay")
							}
						}
						_ = unstructured.SetNestedSlice(spec, http, "http")
					}
					r.edit(t, VirtualServices, "checkout", func(u *unstructured.Unstructured) { setDelay(u.Object["spec"].(map[string]any)) })
					userSpec["checkout"] = editJSON(t, userSpec["checkout"], setDelay)
					r.edit(t, DestinationRules, "checkout", func(u *unstructured.Unstructured) {
						_ = unstructured.SetNestedField(u.Object, delay, "spec", "trafficPolicy", "connectionPool", "http", "idleTimeout")
					})
					snapshot()
					continue
				}
				if !atRest {
					if _, err := rt.Apply(context.Background(), tr); err != nil {
						t.Fatalf("after %v: %v", trail, err)
					}
				}
				for _, o := range objects {
					raw := r.rawJSON(t, o.res, o.name)
					got := unmanaged(t, raw)
					if k := o.res.Resource + "/" + o.name; !maps.Equal(got, want[k]) {
						t.Fatalf("after %v: %s: unmanaged fields changed:\n%s", trail, k, mapDiff(want[k], got))
					}
					if atRest && o.res == VirtualServices {
						if spec := jsonPath(t, raw, "spec"); !bytes.Equal(spec, userSpec[o.name]) {
							t.Fatalf("after %v: VirtualService %s at rest differs from the user's:\n got %s\nwant %s", trail, o.name, spec, userSpec[o.name])
						}
					}
				}
			}
			t.Logf("ops: %s", strings.Join(trail, ", "))
		})
	}
}

// editJSON applies edit to a JSON object and encodes it again the way
// the API server does (keys sorted, numbers as written).
func editJSON(t *testing.T, raw []byte, edit func(map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// toggle adds x to list, or removes it when there (by name).
func toggle[T api.HeaderRoute | api.MirrorRoute](list []T, x T) []T {
	name := func(v T) string {
		switch r := any(v).(type) {
		case api.HeaderRoute:
			return r.Name
		case api.MirrorRoute:
			return r.Name
		}
		return ""
	}
	if i := slices.IndexFunc(list, func(y T) bool { return name(y) == name(x) }); i >= 0 {
		return slices.Delete(slices.Clone(list), i, i+1)
	}
	return append(slices.Clone(list), x)
}

// unmanaged flattens an object, as served, into path → raw JSON bytes of
// each leaf of its annotations and spec, leaving out what sluice manages:
// its ledger annotation, its own http routes (the ledger names them), the
// weights and sticky Set-Cookie of the managed routes' destinations, and
// the subsets' hash labels. List items are keyed by name, or by their
// position among the unnamed ones, so that sluice's inserted routes do
// not shift the user's.
func unmanaged(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	var l ledger
	_ = json.Unmarshal([]byte(obj.Metadata.Annotations[LedgerAnnotation]), &l)
	for _, e := range l {
		for _, n := range e.Routes {
			ours[`spec.http[name=`+n+`]`] = true
		}
	}
	out := map[string]string{}
	for k, v := range obj.Metadata.Annotations {
		if k != LedgerAnnotation {
			out["annotations."+k] = v
		}
	}
	flatten(t, "spec", obj.Spec, out, func(path string) bool {
		for p := range ours {
			if strings.HasPrefix(path, p) {
				return true
			}
		}
		return strings.HasPrefix(path, "spec.http[") && (strings.HasSuffix(path, ".weight") || strings.HasSuffix(path, ".headers.response.add.set-cookie")) ||
			strings.HasPrefix(path, "spec.subsets[") && strings.HasSuffix(path, ".labels."+PodTemplateHashLabel)
	})
	return out
}

func flatten(t *testing.T, path string, raw json.RawMessage, out map[string]string, skip func(string) bool) {
	if skip(path) {
		return
	}
	trimmed := bytes.TrimSpace(raw)
	switch {
	case bytes.HasPrefix(trimmed, []byte("{")):
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			out[path] = "{}"
		}
		for k, v := range m {
			flatten(t, path+"."+k, v, out, skip)
		}
	case bytes.HasPrefix(trimmed, []byte("[")):
		var l []json.RawMessage
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatal(err)
		}
		if len(l) == 0 {
			out[path] = "[]"
		}
		unnamed := 0
		for _, v := range l {
			var named struct {
				Name string `json:"name"`
			}
			key := fmt.Sprintf("#%d", unnamed)
			if json.Unmarshal(v, &named) == nil && named.Name != "" {
				key = "name=" + named.Name
			} else {
				unnamed++
			}
			flatten(t, path+"["+key+"]", v, out, skip)
		}
	default:
		out[path] = string(trimmed)
	}
}

func mapDiff(want, got map[string]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			lines = append(lines, fmt.Sprintf("  %s: want %s, got %s (present %v)", k, want[k], g, ok))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("  %s: unexpected %s", k, got[k]))
		}
	}
	return strings.Join(lines, "\n")
}
