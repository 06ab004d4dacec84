package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// WaveSize is one entry of the sluice.io/waves annotation ("1", "50%"):
// how many of the selected clusters have started once the wave has,
// counted from the first wave (cumulative). scheduler/global orders the
// clusters into waves of these sizes.
type WaveSize struct {
	Count   int // a number of clusters; 0 when Percent is set
	Percent int // a percentage of the selected clusters, 1..100
}

func (w WaveSize) String() string {
	if w.Percent > 0 {
		return strconv.Itoa(w.Percent) + "%"
	}
	return strconv.Itoa(w.Count)
}

// UpTo is how many of n clusters the wave reaches: a percentage rounds up,
// so that every wave of a non-empty selection reaches at least one.
func (w WaveSize) UpTo(n int) int {
	if w.Percent > 0 {
		return min(n, int(math.Ceil(float64(w.Percent)*float64(n)/100)))
	}
	return min(n, w.Count)
}

// ParseWaves reads a waves annotation such as "1,50%,100%". Sizes are
// cumulative and must not decrease; the last must reach every selected
// cluster (100%), so that no cluster is silently left out. Empty means
// one wave of all clusters.
func ParseWaves(s string) ([]WaveSize, error) {
	if strings.TrimSpace(s) == "" {
		return []WaveSize{{Percent: 100}}, nil
	}
	var out []WaveSize
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		w, err := parseWave(part)
		if err != nil {
			return nil, fmt.Errorf("wave %d %q: %w", i+1, part, err)
		}
		if i > 0 && w.Percent == 0 && out[i-1].Percent == 0 && w.Count < out[i-1].Count ||
			i > 0 && w.Percent > 0 && out[i-1].Percent > 0 && w.Percent < out[i-1].Percent {
			return nil, fmt.Errorf("wave %d %q: sizes are cumulative and must not decrease (wave %d is %s)", i+1, part, i, out[i-1])
		}
		out = append(out, w)
	}
	if last := out[len(out)-1]; last.Percent != 100 {
		return nil, fmt.Errorf("the last wave is %s: it must be 100%% so that every selected cluster is reached", last)
	}
	return out, nil
}

func parseWave(part string) (WaveSize, error) {
	if p, ok := strings.CutSuffix(part, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return WaveSize{}, fmt.Errorf("a percentage must be 1%% to 100%%")
		}
		return WaveSize{Percent: n}, nil
	}
	n, err := strconv.Atoi(part)
	if err != nil || n < 1 {
		return WaveSize{}, fmt.Errorf("a wave is a number of clusters (at least 1) or a percentage")
	}
	return WaveSize{Count: n}, nil
}
