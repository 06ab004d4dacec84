package analysis

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// Result is what a provider measured.
type Result struct {
	// Value is bound to `result` in conditions: float64 for a scalar,
	// []float64 for a vector, any JSON value for the web provider.
	Value any
	// Text is Value for people and status ("0.998", "[0.1,0.2]").
	Text string
	// Phase, when set, decides the measurement without conditions: the
	// providers use Inconclusive for "no data" and "not enough data".
	Phase   Phase
	Message string
}

// Evaluate decides one measurement from a provider result with the
// metric's conditions, as Argo does: with only a successCondition a false
// one fails; with only a failureCondition a false one succeeds; with both,
// neither holding is Inconclusive; with none, any value succeeds.
func Evaluate(m *Metric, r Result) (Phase, string) {
	if r.Phase != "" {
		return r.Phase, r.Message
	}
	var succeeded, failed bool
	if m.success != nil {
		ok, err := api.EvalCondition(m.success, r.Value)
		if err != nil {
			return PhaseError, fmt.Sprintf("successCondition %q on %s: %v", m.SuccessCondition, valueText(r), err)
		}
		succeeded = ok
	}
	if m.failure != nil {
		ok, err := api.EvalCondition(m.failure, r.Value)
		if err != nil {
			return PhaseError, fmt.Sprintf("failureCondition %q on %s: %v", m.FailureCondition, valueText(r), err)
		}
		failed = ok
	}
	switch {
	case m.success == nil && m.failure == nil:
		return PhaseSuccessful, r.Message
	case m.failure != nil && failed:
		return PhaseFailed, joinMessage(substitute(m.FailureCondition, r), r.Message)
	case m.failure == nil && !succeeded:
		return PhaseFailed, joinMessage(negate(m.SuccessCondition, r), r.Message)
	case m.success != nil && !succeeded:
		return PhaseInconclusive, joinMessage(fmt.Sprintf("%s: neither %q nor %q holds", valueText(r), m.SuccessCondition, m.FailureCondition), r.Message)
	}
	return PhaseSuccessful, r.Message
}

func joinMessage(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

func valueText(r Result) string {
	if r.Text != "" {
		return r.Text
	}
	return FormatValue(r.Value)
}

// FormatValue prints a measured value compactly: floats with up to four
// significant digits after the point, vectors in brackets.
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case float64:
		return formatFloat(x)
	case []float64:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = formatFloat(f)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}

// scalar returns the single number of a measurement, for the
// sluice_analysis_metric_value gauge.
func scalar(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case []float64:
		if len(x) == 1 {
			return x[0], true
		}
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// simpleComparison is "result OP operand" or "result[0] OP operand", the
// shape of nearly every real condition; it lets a verdict read
// "0.912 < 0.99" rather than "not (result >= 0.99)".
var simpleComparison = regexp.MustCompile(`^\s*result(\[0\])?\s*(>=|<=|==|!=|>|<)\s*(.+?)\s*$`)

var negated = map[string]string{">=": "<", "<=": ">", ">": "<=", "<": ">=", "==": "!=", "!=": "=="}

// negate renders why a successCondition did not hold.
func negate(cond string, r Result) string {
	if m := simpleComparison.FindStringSubmatch(cond); m != nil {
		return operand(m[1], r) + " " + negated[m[2]] + " " + m[3]
	}
	return fmt.Sprintf("%s does not satisfy %s", valueText(r), strings.TrimSpace(cond))
}

// substitute renders why a failureCondition held.
func substitute(cond string, r Result) string {
	if m := simpleComparison.FindStringSubmatch(cond); m != nil {
		return operand(m[1], r) + " " + m[2] + " " + m[3]
	}
	return fmt.Sprintf("%s satisfies %s", valueText(r), strings.TrimSpace(cond))
}

// operand is the value the comparison looked at: the first element when
// the condition indexes result[0].
func operand(index string, r Result) string {
	if v, ok := r.Value.([]float64); ok && index != "" && len(v) > 0 {
		return formatFloat(v[0])
	}
	return valueText(r)
}
