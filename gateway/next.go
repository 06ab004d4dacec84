package gateway

import (
	"bytes"
	"fmt"
	"slices"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rolloutChange is one rollout's new state and resources in a publish; a
// nil ro removes the rollout.
type rolloutChange struct {
	key api.Key
	ro  *rolloutState
	res *Resources
	// owned are res's resources already encoded (setTraffic encodes them
	// to see which changed before it validates); nil: taken from res and
	// encoded here.
	owned []named
}

// ownedName is one resource a rollout published.
type ownedName struct {
	t    typeIdx
	name string
}

// envoyConfig is what the shared sluice-http resources depend on.
type envoyConfig struct {
	layout   EnvoyRouteLayout
	listener named // the sluice-http Listener, encoded and validated once (newEnvoyConfig)
}

// newEnvoyConfig builds and validates the sluice-http Listener.
func newEnvoyConfig(port uint32, layout EnvoyRouteLayout) (envoyConfig, error) {
	if err := layout.check(); err != nil {
		return envoyConfig{}, err
	}
	l := EnvoyListener(port, layout)
	if err := ValidateEnvoy(l, nil); err != nil {
		return envoyConfig{}, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(l)
	if err != nil {
		return envoyConfig{}, fmt.Errorf("marshal %s listener: %w", EnvoyName, err)
	}
	return envoyConfig{layout: layout, listener: named{t: lds, name: EnvoyName, raw: b}}, nil
}

// next builds the generation after s with the given changes. It touches
// only the changed rollouts' resources: the rest of the state is shared
// with s through the immutable trees, so a change to one rollout costs the
// same at 10,000 rollouts as at 1,000 — except in the combined Envoy
// layout, whose sluice-http route holds every virtual host and is
// re-assembled (from encoded bytes) on every change. Resources whose bytes
// are unchanged keep their pointer and generation.
func (s *snapshot) next(changes []rolloutChange, env envoyConfig) (*snapshot, bool, error) {
	b := newGenBuilder(s)
	for _, c := range changes {
		if err := b.apply(c, env.layout); err != nil {
			return nil, false, err
		}
	}
	if err := b.putShared(env); err != nil {
		return nil, false, err
	}
	n, changed := b.commit()
	return n, changed, nil
}

// genBuilder accumulates one new generation in radix-tree transactions.
type genBuilder struct {
	old      *snapshot
	gen      uint64
	rollouts *iradix.Txn[*rolloutState]
	hosts    *iradix.Txn[api.Key]
	types    [numTypes]*iradix.Txn[*resource]
	touched  [numTypes]map[string]bool
}

func newGenBuilder(s *snapshot) *genBuilder {
	b := &genBuilder{old: s, gen: s.gen + 1, rollouts: s.rollouts.Txn(), hosts: s.hosts.Txn()}
	for t := range numTypes {
		b.types[t] = s.types[t].tree.Txn()
		b.touched[t] = map[string]bool{}
	}
	return b
}

// apply replaces one rollout's resources.
func (b *genBuilder) apply(c rolloutChange, layout EnvoyRouteLayout) error {
	owned := c.owned
	if owned == nil && c.ro != nil {
		owned = ownedResources(c.res, layout, c.ro.backOnly)
	}
	// A rollout that serves the same host again keeps its entry: deleting
	// and inserting it copied its path of the tree twice, on every step.
	hostKept := false
	if old, ok := b.rollouts.Get(rolloutTreeKey(c.key)); ok {
		if k, ok := b.hosts.Get([]byte(old.traffic.Host)); ok && k == c.key {
			hostKept = c.ro != nil && !c.ro.backOnly && c.ro.traffic.Host == old.traffic.Host
			if !hostKept {
				b.hosts.Delete([]byte(old.traffic.Host))
			}
		}
		for _, w := range old.owned {
			// A name published again is replaced by put: deleting it
			// first walked the tree twice for nothing.
			if !slices.ContainsFunc(owned, func(n named) bool { return n.t == w.t && n.name == w.name }) {
				b.types[w.t].Delete([]byte(w.name))
			}
			b.touched[w.t][w.name] = true
		}
	}
	if c.ro == nil {
		b.rollouts.Delete(rolloutTreeKey(c.key))
		return nil
	}
	host := c.ro.traffic.Host
	if !c.ro.backOnly && !hostKept {
		if other, dup := b.hosts.Get([]byte(host)); dup {
			return &ValidationError{Rollout: c.key, Rule: "host", Err: fmt.Errorf("host %q is already served by rollout %s", host, other)}
		}
		b.hosts.Insert([]byte(host), c.key)
	}
	b.rollouts.Insert(rolloutTreeKey(c.key), c.ro)
	c.ro.owned = make([]ownedName, 0, len(owned))
	for _, w := range owned {
		w.owner = c.key
		if err := b.put(w); err != nil {
			return err
		}
		c.ro.owned = append(c.ro.owned, ownedName{w.t, w.name})
	}
	return nil
}

// put publishes one resource. One whose bytes did not change keeps its
// pointer and generation, and the tree is left alone: most of a rollout's
// resources are the same at every step (its clusters, endpoints and
// listener; only the route's weights move), and inserting them again
// copied their path of the tree, and hashed and wrapped their bytes, for
// nothing.
func (b *genBuilder) put(w named) error {
	key := []byte(w.name)
	b.touched[w.t][w.name] = true
	typeURL, raw, err := w.encode(typeURLs[w.t])
	if err != nil {
		return err
	}
	if cur, ok := b.types[w.t].Get(key); ok && bytes.Equal(cur.any.Value, raw) {
		return nil
	}
	nr := rawResource(w.name, typeURL, raw, b.gen)
	nr.owner = w.owner
	b.types[w.t].Insert(key, nr)
	return nil
}

// putShared publishes the sluice-http Listener and, in the combined layout,
// the sluice-http RouteConfiguration of every virtual host.
func (b *genBuilder) putShared(env envoyConfig) error {
	if err := b.put(env.listener); err != nil {
		return err
	}
	if env.layout != EnvoyRoutesCombined {
		return nil
	}
	// No two virtual hosts share a domain: each has exactly H and H:*,
	// and hosts are unique (apply) and hold no ':' or '*' (checkTraffic).
	var encoded [][]byte
	b.rollouts.Root().Walk(func(_ []byte, ro *rolloutState) bool {
		if !ro.backOnly {
			encoded = append(encoded, ro.vhost)
		}
		return false
	})
	return b.put(named{t: rds, name: EnvoyName, raw: envoyRouteBytes(encoded)})
}

// commit ends the transactions. A type none of whose resources changed
// keeps its set (and that set's cache of encoded responses).
func (b *genBuilder) commit() (*snapshot, bool) {
	n := &snapshot{gen: b.gen, rollouts: b.rollouts.Commit(), hosts: b.hosts.Commit()}
	changed := false
	for t := range numTypes {
		old := b.old.types[t]
		var names []string
		for name := range b.touched[t] {
			nr, _ := b.types[t].Get([]byte(name))
			if nr != old.get(name) {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			n.types[t] = old
			continue
		}
		changed = true
		slices.Sort(names)
		n.types[t] = &typeSet{url: typeURLs[t], gen: b.gen, tree: b.types[t].Commit(), log: newChangeLog(old.gen, names, old.log)}
	}
	return n, changed
}

// ownedResources are one rollout's resources: clusters, endpoints, the
// gRPC listener and route configuration, and in the scoped Envoy layout
// its route scope; with backOnly (a part whose host another part's routes
// serve in a view) its clusters and endpoints only.
func ownedResources(r *Resources, layout EnvoyRouteLayout, backOnly bool) []named {
	out := make([]named, 0, 2*len(r.Clusters)+3)
	for _, c := range r.Clusters {
		out = append(out, named{t: cds, name: c.GetName(), msg: c})
	}
	for _, e := range r.Endpoints {
		out = append(out, named{t: eds, name: e.GetClusterName(), msg: e})
	}
	if backOnly {
		return out
	}
	out = append(out, named{t: lds, name: r.Listener.GetName(), msg: r.Listener}, named{t: rds, name: r.Route.GetName(), msg: r.Route})
	if layout != EnvoyRoutesCombined {
		out = append(out, named{t: srds, name: r.Scope.GetName(), msg: r.Scope})
	}
	return out
}

// encodeOwned is a rollout's resources as publish puts them, encoded.
func encodeOwned(r *Resources, layout EnvoyRouteLayout) ([]named, error) {
	owned := ownedResources(r, layout, false)
	for i, w := range owned {
		_, raw, err := w.encode("")
		if err != nil {
			return nil, err
		}
		owned[i].raw = raw
	}
	return owned, nil
}

// published are the messages of the encoded resources owned whose bytes s
// holds under the same name and type: each passed Validate when it was
// published, so its ValidateAll need not run again. listenerChecked says
// whether the check of the listener's HttpConnectionManager (unpacked from
// its Any, validated, its route name compared) passed for these very
// bytes and this route name: the listener is byte for byte the one rollout
// key published, and the route it published with it has r's route's name.
func (s *snapshot) published(key api.Key, r *Resources, owned []named) (out []proto.Message, listenerChecked bool) {
	for _, w := range owned {
		if cur := s.types[w.t].get(w.name); cur != nil && bytes.Equal(cur.any.Value, w.raw) {
			out = append(out, w.msg)
			listenerChecked = listenerChecked || w.t == lds
		}
	}
	old := s.rollout(key)
	if old == nil || !listenerChecked {
		return out, false
	}
	var listeners, routes []string
	for _, o := range old.owned {
		switch o.t {
		case lds:
			listeners = append(listeners, o.name)
		case rds:
			routes = append(routes, o.name)
		}
	}
	listenerChecked = slices.Equal(listeners, []string{r.Listener.GetName()}) && slices.Equal(routes, []string{r.Route.GetName()})
	return out, listenerChecked
}

// named is one resource to publish, before it is encoded.
type named struct {
	t     typeIdx
	name  string
	msg   proto.Message
	raw   []byte  // already encoded (the combined route, or by encodeOwned), instead of msg
	owner api.Key // zero for the shared sluice-http resources
}

// encode returns the resource's type URL and bytes; typeURL is its type's,
// for one already encoded.
func (w named) encode(typeURL string) (string, []byte, error) {
	if w.raw != nil {
		return typeURL, w.raw, nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(w.msg)
	if err != nil {
		return "", nil, fmt.Errorf("marshal %s: %w", w.name, err)
	}
	return resourcev3.APITypePrefix + string(w.msg.ProtoReflect().Descriptor().FullName()), b, nil
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

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
