package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// typeIdx numbers the four resource types in the order a change is sent:
// clusters and endpoints before the listeners and routes that use them
// (make before break).
type typeIdx int

const (
	cds typeIdx = iota
	eds
	lds
	rds
	numTypes
)

var typeURLs = [numTypes]string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType}

func typeOf(url string) (typeIdx, bool) {
	for i, u := range typeURLs {
		if u == url {
			return typeIdx(i), true
		}
	}
	return 0, false
}

// wildcardable types treat an empty first subscription as "everything".
func (t typeIdx) wildcardable() bool { return t == cds || t == lds }

// resource is one immutable, packed resource. A resource whose content does
// not change between generations keeps the same pointer, so comparing
// pointers compares content.
type resource struct {
	name    string
	any     *anypb.Any
	delta   *discoveryv3.Resource
	version string // content hash: the delta resource version
	gen     uint64 // generation that published this content
}

func newResource(name string, m proto.Message, gen uint64) (*resource, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", name, err)
	}
	return rawResource(name, resourcev3.APITypePrefix+string(m.ProtoReflect().Descriptor().FullName()), b, gen), nil
}

func rawResource(name, typeURL string, b []byte, gen uint64) *resource {
	sum := sha256.Sum256(b)
	r := &resource{
		name:    name,
		any:     &anypb.Any{TypeUrl: typeURL, Value: b},
		version: hex.EncodeToString(sum[:8]),
		gen:     gen,
	}
	r.delta = &discoveryv3.Resource{Name: name, Version: r.version, Resource: r.any}
	return r
}

// typeSet is every resource of one type in one generation.
type typeSet struct {
	url    string
	gen    uint64 // generation of the last change to this type
	byName map[string]*resource
	sorted []*resource
	// responses caches one encoded state-of-the-world response per distinct
	// subscription, shared by every stream with that subscription.
	responses sync.Map // subscription key -> *sotwResponse
}

func (ts *typeSet) version() string { return strconv.FormatUint(ts.gen, 10) }

// rolloutState is what the state keeps per rollout.
type rolloutState struct {
	traffic api.Traffic
	res     *Resources
	version string // returned by SetTraffic, taken by WaitForAck
	gen     uint64 // generation of version
	hash    string // hash of traffic
	vhost   []byte // res.VirtualHost, encoded, for the combined route
}

// snapshot is one immutable generation of everything served.
type snapshot struct {
	gen      uint64
	rollouts map[api.Key]*rolloutState
	hosts    map[string]api.Key
	types    [numTypes]*typeSet
}

func emptySnapshot() *snapshot {
	s := &snapshot{rollouts: map[api.Key]*rolloutState{}, hosts: map[string]api.Key{}}
	for i := range s.types {
		s.types[i] = &typeSet{url: typeURLs[i], byName: map[string]*resource{}}
	}
	return s
}

// trafficHash identifies a traffic spec; equal specs publish nothing new.
func trafficHash(t api.Traffic) string {
	b, _ := json.Marshal(t) // plain structs of strings and numbers: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:4])
}

// parseVersion reads the generation out of a rollout version "<gen>-<hash>".
func parseVersion(v string) (uint64, error) {
	for i := 0; i < len(v); i++ {
		if v[i] == '-' {
			v = v[:i]
			break
		}
	}
	g, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("version %q is not a sluice version", v)
	}
	return g, nil
}

// next builds the generation after s in which rollout key has resources res
// (nil removes the rollout). It copies only the maps that change; resources
// whose bytes are unchanged keep their pointer and generation.
func (s *snapshot) next(key api.Key, ro *rolloutState, envoyPort uint32, validate bool) (*snapshot, bool, error) {
	gen := s.gen + 1
	n := &snapshot{gen: gen, rollouts: maps(s.rollouts), hosts: map[string]api.Key{}}
	if ro == nil {
		delete(n.rollouts, key)
	} else {
		n.rollouts[key] = ro
	}
	for k, r := range n.rollouts {
		if other, dup := n.hosts[r.traffic.Host]; dup {
			return nil, false, &ValidationError{Rollout: key, Rule: "host", Err: fmt.Errorf("host %q is already served by rollout %s", r.traffic.Host, other)}
		}
		n.hosts[r.traffic.Host] = k
	}
	// Collect every message by type, in a stable order.
	keys := make([]api.Key, 0, len(n.rollouts))
	for k := range n.rollouts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b api.Key) int {
		if a.Namespace != b.Namespace {
			return cmpStr(a.Namespace, b.Namespace)
		}
		return cmpStr(a.Name, b.Name)
	})
	var want [numTypes][]named
	vhosts := make([]*routev3.VirtualHost, 0, len(keys))
	vhostBytes := make([][]byte, 0, len(keys))
	for _, k := range keys {
		r := n.rollouts[k].res
		for _, c := range r.Clusters {
			want[cds] = append(want[cds], named{name: c.GetName(), msg: c, owner: k})
		}
		for _, e := range r.Endpoints {
			want[eds] = append(want[eds], named{name: e.GetClusterName(), msg: e, owner: k})
		}
		want[lds] = append(want[lds], named{name: r.Listener.GetName(), msg: r.Listener, owner: k})
		want[rds] = append(want[rds], named{name: r.Route.GetName(), msg: r.Route, owner: k})
		vhosts = append(vhosts, r.VirtualHost)
		vhostBytes = append(vhostBytes, n.rollouts[k].vhost)
	}
	el := envoyListener(envoyPort)
	if err := ValidateEnvoy(el, vhosts); err != nil && validate {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.Rollout = key
		}
		return nil, false, err
	}
	want[lds] = append(want[lds], named{name: el.GetName(), msg: el})
	want[rds] = append(want[rds], named{name: EnvoyName, raw: envoyRouteBytes(vhostBytes)})

	changed := false
	for t := range numTypes {
		old := s.types[t]
		ts := &typeSet{url: typeURLs[t], gen: old.gen, byName: make(map[string]*resource, len(want[t]))}
		typeChanged := len(want[t]) != len(old.byName)
		for _, w := range want[t] {
			or := old.byName[w.name]
			if or != nil && w.owner != (api.Key{}) && w.owner != key {
				// Another rollout's resources are the same objects as in
				// the previous generation: no need to marshal them again.
				ts.byName[w.name] = or
				ts.sorted = append(ts.sorted, or)
				continue
			}
			nr, err := w.resource(typeURLs[t], gen)
			if err != nil {
				return nil, false, err
			}
			if or != nil && or.version == nr.version {
				nr = or // unchanged content keeps its pointer and generation
			} else {
				typeChanged = true
			}
			ts.byName[w.name] = nr
			ts.sorted = append(ts.sorted, nr)
		}
		if !typeChanged {
			n.types[t] = old // keeps its cache of encoded responses
			continue
		}
		changed = true
		ts.gen = gen
		slices.SortFunc(ts.sorted, func(a, b *resource) int { return cmpStr(a.name, b.name) })
		n.types[t] = ts
	}
	return n, changed, nil
}

type named struct {
	name  string
	msg   proto.Message
	raw   []byte  // already encoded (the combined route), instead of msg
	owner api.Key // zero for the shared sluice-http resources
}

func (w named) resource(typeURL string, gen uint64) (*resource, error) {
	if w.raw != nil {
		return rawResource(w.name, typeURL, w.raw, gen), nil
	}
	return newResource(w.name, w.msg, gen)
}

// envoyRouteBytes encodes the sluice-http RouteConfiguration from the
// already encoded virtual hosts, exactly as a deterministic Marshal would
// (name is field 1, virtual_hosts field 2, in field order): with a
// thousand rollouts, a change then costs a copy, not a marshal of all.
func envoyRouteBytes(vhosts [][]byte) []byte {
	size := len(EnvoyName) + 2
	for _, v := range vhosts {
		size += len(v) + 6
	}
	b := make([]byte, 0, size)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, EnvoyName)
	for _, v := range vhosts {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	return b
}

func maps[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
