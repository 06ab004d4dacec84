package ackboard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
)

// LabelBoard marks a follower's ConfigMap; its value is the follower's
// identity.
const LabelBoard = "sluice.io/xds-acks-of"

// namePrefix starts every follower's ConfigMap name.
const namePrefix = "sluice-acks-"

// dataKey holds the report's JSON in the ConfigMap.
const dataKey = "acks.json"

// HostAck is what a follower's clients did with the routes of one host.
type HostAck struct {
	// Routes is RoutesHash of the traffic the follower serves for the host.
	Routes string `json:"routes"`
	// Nack is set when one of its clients rejected those routes: the
	// client's detail. Empty when every client ACKed them.
	Nack string `json:"nack,omitempty"`
}

// report is the content of a follower's ConfigMap.
type report struct {
	Identity string             `json:"identity"`
	Beat     uint64             `json:"beat"` // changes at every write: the heartbeat
	Hosts    map[string]HostAck `json:"hosts"`
}

// RoutesHash identifies the routes (the virtual host: weights, header
// and mirror routes, session affinity) that traffic t gives its clients.
// Replicas fill endpoints from their own informers and number xDS versions
// their own way; equal routes mean equal weights for the clients.
func RoutesHash(t api.Traffic) (string, error) {
	res, err := gateway.Translate(t)
	if err != nil {
		return "", fmt.Errorf("routes of %s: %w", t.Rollout, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(res.VirtualHost)
	if err != nil {
		return "", fmt.Errorf("routes of %s: %w", t.Rollout, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

var notDNS = regexp.MustCompile(`[^a-z0-9.-]+`)

// ConfigMapName is the name of the ConfigMap of the follower with this
// identity: a DNS subdomain made from it.
func ConfigMapName(identity string) string {
	n := namePrefix + strings.Trim(notDNS.ReplaceAllString(strings.ToLower(identity), "-"), "-.")
	if len(n) > 253 {
		n = n[:253]
	}
	return strings.TrimRight(n, "-.")
}

func decodeReport(data map[string]string) (report, error) {
	var r report
	if err := json.Unmarshal([]byte(data[dataKey]), &r); err != nil {
		return report{}, fmt.Errorf("decode %s: %w", dataKey, err)
	}
	return r, nil
}
