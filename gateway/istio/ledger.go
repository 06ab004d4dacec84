package istio

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// LedgerAnnotation records, on each VirtualService and DestinationRule
// sluice writes, what it wrote there per rollout: the names of the http
// routes it inserted (so that they can be removed after a restart, when
// the step that added them is gone) and a checksum of the managed fields
// as written (so that someone else's edit is told apart from sluice's own
// last write). Keeping it in the object, not in memory, makes both survive
// a restart and a change of leader.
const LedgerAnnotation = "sluice.io/managed"

// ledgerEntry is one rollout's record in LedgerAnnotation.
type ledgerEntry struct {
	// Routes are the http routes sluice inserted, in order.
	Routes []string `json:"routes,omitempty"`
	// Sum is the checksum of the managed fields' projection as written.
	Sum string `json:"sum"`
}

// ledger is the decoded LedgerAnnotation, keyed by rollout (ns/name).
type ledger map[string]ledgerEntry

func readLedger(obj *unstructured.Unstructured) (ledger, error) {
	raw, ok := obj.GetAnnotations()[LedgerAnnotation]
	if !ok || raw == "" {
		return ledger{}, nil
	}
	l := ledger{}
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		return nil, fmt.Errorf("%s %s/%s: annotation %s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), LedgerAnnotation, err)
	}
	return l, nil
}

// writeLedger stores l, dropping the annotation once no rollout has an
// entry so that a released object carries nothing of sluice's.
func writeLedger(obj *unstructured.Unstructured, l ledger) error {
	ann := obj.GetAnnotations()
	if len(l) == 0 {
		if _, ok := ann[LedgerAnnotation]; ok {
			delete(ann, LedgerAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			obj.SetAnnotations(ann)
		}
		return nil
	}
	b, err := json.Marshal(l) // map keys come out sorted: a stable value
	if err != nil {
		return err
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[LedgerAnnotation] = string(b)
	obj.SetAnnotations(ann)
	return nil
}

// checksum of a projection (the managed fields, one line each).
func checksum(lines []string) string {
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:8])
}

// Drift is someone else's edit of fields sluice manages, found before
// sluice wrote them again: the caller turns it into an event.
type Drift struct {
	Rollout api.Key
	// Object is "VirtualService ns/name" or "DestinationRule ns/name".
	Object string
	// Found lists the managed fields as they were found, one per line.
	Found []string
}

func (d Drift) String() string {
	return fmt.Sprintf("%s: fields managed by sluice for rollout %s were changed by someone else and are re-applied (found: %s)",
		d.Object, d.Rollout, strings.Join(d.Found, "; "))
}

// detectDrift compares the managed fields as found with the checksum
// sluice recorded at its last write; nil when there was no write yet or
// nothing changed.
func detectDrift(key api.Key, object string, prev ledgerEntry, hadEntry bool, found []string) *Drift {
	if !hadEntry || prev.Sum == checksum(found) {
		return nil
	}
	return &Drift{Rollout: key, Object: object, Found: found}
}

func objectName(obj *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
}
