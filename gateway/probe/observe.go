package probe

import (
	"sort"
	"time"
)

// DefaultClass is the class of untagged requests: the ones the weighted
// default route splits between stable and canary.
const DefaultClass = "default"

// Count is what one version answered.
type Count struct {
	OK     int `json:"ok"`
	Failed int `json:"failed"`
}

// Total is OK + Failed.
func (c Count) Total() int { return c.OK + c.Failed }

// Split is the observed answers of one request class over the window, by
// the version that answered. Calls that failed before any backend named
// itself (no route yet, deadline) are under the empty version.
type Split map[string]Count

// Total counts every call in the split, unattributed ones included.
func (s Split) Total() int {
	n := 0
	for _, c := range s {
		n += c.Total()
	}
	return n
}

// Answered counts the calls some version answered (OK or failed).
func (s Split) Answered() int { return s.Total() - s[""].Total() }

// Share is the fraction of answered calls that version v answered, 0 when
// none were answered.
func (s Split) Share(v string) float64 {
	n := s.Answered()
	if n == 0 || v == "" {
		return 0
	}
	return float64(s[v].Total()) / float64(n)
}

// Versions lists the versions that answered, sorted.
func (s Split) Versions() []string {
	var vs []string
	for v := range s {
		if v != "" {
			vs = append(vs, v)
		}
	}
	sort.Strings(vs)
	return vs
}

// Observation is a LoadGen's view of the last window.
type Observation struct {
	At     time.Time        `json:"at"`
	Window time.Duration    `json:"window"`
	Rate   float64          `json:"rate"`    // configured total requests/s
	Sent   int64            `json:"sent"`    // calls started since Run
	Missed int64            `json:"missed"`  // calls skipped: too many in flight
	Class  map[string]Split `json:"classes"` // by class name, DefaultClass included
}

// obsKey is one counted answer.
type obsKey struct {
	class, version string
	ok             bool
}

func splitsOf(counts map[obsKey]int) map[string]Split {
	out := map[string]Split{}
	for k, n := range counts {
		s := out[k.class]
		if s == nil {
			s = Split{}
			out[k.class] = s
		}
		c := s[k.version]
		if k.ok {
			c.OK += n
		} else {
			c.Failed += n
		}
		s[k.version] = c
	}
	return out
}
