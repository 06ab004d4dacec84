package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	iradix "github.com/hashicorp/go-immutable-radix/v2"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/types/known/anypb"
)

// typeIdx numbers the resource types in the order a change is sent:
// clusters and endpoints before the listeners and routes that use them
// (make before break), and a route configuration before the Envoy route
// scope that points at it.
type typeIdx int

const (
	cds typeIdx = iota
	eds
	lds
	rds
	srds
	numTypes
)

var typeURLs = [numTypes]string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ScopedRouteType}

func typeOf(url string) (typeIdx, bool) {
	for i, u := range typeURLs {
		if u == url {
			return typeIdx(i), true
		}
	}
	return 0, false
}

// wildcardable types treat an empty first subscription as "everything".
// Envoy takes route scopes by wildcard too.
func (t typeIdx) wildcardable() bool { return t == cds || t == lds || t == srds }

// partialInSotW types may get, over state of the world, only the resources
// that changed: the xDS protocol asks the complete state only of Listener
// and Cluster ("Grouping Resources into Responses"; grpc-go and C-core
// call it AllResourcesRequiredInSotW). A client subscribed to many routes
// by name, as Envoy is to one RouteConfiguration per scope, then receives
// a one-rollout change, not every route. Envoy takes route scopes as the
// complete state, so srds is not one.
func (t typeIdx) partialInSotW() bool { return t == rds || t == eds }

// resource is one immutable, packed resource. A resource whose content does
// not change between generations keeps the same pointer, so comparing
// pointers compares content.
type resource struct {
	name    string
	any     *anypb.Any
	delta   *discoveryv3.Resource
	version string  // content hash: the delta resource version
	gen     uint64  // generation that published this content
	owner   api.Key // the rollout it belongs to; zero for the shared sluice-http resources
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

// typeSet is every resource of one type in one generation. The resources
// live in an immutable radix tree (go-immutable-radix): a new generation
// shares every node but the changed paths with the previous one, so one
// change costs O(log n), not a copy of n resources.
type typeSet struct {
	url  string
	gen  uint64 // generation of the last change to this type
	tree *iradix.Tree[*resource]
	// log holds the names changed since the set this one was made from,
	// and before it (changelog.go): a delta stream at one of those
	// generations looks at those names only. Nil for an empty set.
	log *changeLog

	sortOnce sync.Once
	sorted   []*resource // all, by name; built on first use (wildcard responses)

	// responses caches one encoded state-of-the-world response per distinct
	// subscription, shared by every stream with that subscription.
	responses sync.Map // subscription key -> *sotwResponse
}

func (ts *typeSet) version() string { return strconv.FormatUint(ts.gen, 10) }

// get returns the resource named name, or nil.
func (ts *typeSet) get(name string) *resource {
	r, _ := ts.tree.Get([]byte(name))
	return r
}

// all returns every resource, sorted by name (the tree's byte order).
func (ts *typeSet) all() []*resource {
	ts.sortOnce.Do(func() {
		ts.sorted = make([]*resource, 0, ts.tree.Len())
		ts.tree.Root().Walk(func(_ []byte, r *resource) bool {
			ts.sorted = append(ts.sorted, r)
			return false
		})
	})
	return ts.sorted
}

// rolloutState is what the state keeps per rollout.
type rolloutState struct {
	traffic api.Traffic
	// owned names the rollout's published resources, to withdraw them
	// later. The Resources themselves are not kept: at 10,000 rollouts
	// their protos would hold about as much memory as everything else
	// served (90 MB), and the encoded resources are what is sent.
	owned []ownedName
	*stamp
	hash  string // hash of traffic
	vhost []byte // the virtual host, encoded, for the combined route (nil in the scoped layout)
	// res are a part's resources (a rollout across clusters, views.go),
	// kept to publish it again when another part takes over its host's
	// routes in a view; nil for other rollouts.
	res *Resources
	// backOnly: in this view the part publishes its clusters and
	// endpoints only, another part's routes serve its host.
	backOnly bool
}

// stamp is the version of a rollout's traffic. The copies of a part's
// state in every view share it.
type stamp struct {
	version string // returned by SetTraffic, taken by WaitForAck
	gen     uint64 // generation of version
	// published is when version was published, and pushObserved whether
	// sluice_xds_push_seconds has its observation: the first WaitForAck
	// of the version to succeed makes it (observePush).
	published    time.Time
	pushObserved atomic.Bool
}

// snapshot is one immutable generation of everything served.
type snapshot struct {
	gen      uint64
	rollouts *iradix.Tree[*rolloutState] // by rolloutTreeKey
	hosts    *iradix.Tree[api.Key]       // by host
	types    [numTypes]*typeSet
	// views are what the clients of each cluster get, at the same
	// generation (views.go); set on the default snapshot only.
	views map[string]*snapshot
}

func emptySnapshot() *snapshot {
	s := &snapshot{rollouts: iradix.New[*rolloutState](), hosts: iradix.New[api.Key]()}
	for i := range s.types {
		s.types[i] = &typeSet{url: typeURLs[i], tree: iradix.New[*resource]()}
	}
	return s
}

// rolloutTreeKey orders rollouts by namespace, then name (NUL sorts
// before every byte a name may hold).
func rolloutTreeKey(k api.Key) []byte { return []byte(k.Namespace + "\x00" + k.Name) }

// rollout returns the state of rollout k, or nil.
func (s *snapshot) rollout(k api.Key) *rolloutState {
	ro, _ := s.rollouts.Get(rolloutTreeKey(k))
	return ro
}

// stampOf is the stamp of rollout k's traffic when version is what it
// serves now, else nil.
func (s *snapshot) stampOf(k api.Key, version string) *stamp {
	if ro := s.rollout(k); ro != nil && ro.version == version {
		return ro.stamp
	}
	return nil
}

// hostKey returns the rollout serving host.
func (s *snapshot) hostKey(host string) (api.Key, bool) { return s.hosts.Get([]byte(host)) }

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
