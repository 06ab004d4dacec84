package api

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// conditionEnv is what a successCondition or failureCondition sees: the
// measurement as `result` (a float64 for a scalar, a []float64 for a
// vector, or whatever JSON value a web provider extracted). It is typed
// any so one compiled program serves every provider.
type conditionEnv struct {
	Result any `expr:"result"`
}

// conditionOptions are the helpers Argo Rollouts users rely on, declared
// as expr functions so a condition is compiled once and run many times
// (Argo recompiles on every measurement).
var conditionOptions = []expr.Option{
	expr.Env(conditionEnv{}),
	expr.AsBool(),
	expr.Function("isNaN", func(p ...any) (any, error) {
		f, err := toFloat(p[0])
		if err != nil {
			return nil, fmt.Errorf("isNaN: %w", err)
		}
		return math.IsNaN(f), nil
	}, new(func(any) bool)),
	expr.Function("isInf", func(p ...any) (any, error) {
		f, err := toFloat(p[0])
		if err != nil {
			return nil, fmt.Errorf("isInf: %w", err)
		}
		return math.IsInf(f, 0), nil
	}, new(func(any) bool)),
	expr.Function("asFloat", func(p ...any) (any, error) {
		f, err := toFloat(p[0])
		if err != nil {
			return nil, fmt.Errorf("asFloat: %w", err)
		}
		return f, nil
	}, new(func(any) float64)),
	expr.Function("asInt", func(p ...any) (any, error) {
		if s, ok := p[0].(string); ok {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("asInt: %w", err)
			}
			return i, nil
		}
		f, err := toFloat(p[0])
		if err != nil {
			return nil, fmt.Errorf("asInt: %w", err)
		}
		return int64(f), nil
	}, new(func(any) int64)),
	// default(result, x) is x when result is nil (no value), as in Argo.
	expr.Function("default", func(p ...any) (any, error) {
		if isNilValue(p[0]) {
			return p[1], nil
		}
		return p[0], nil
	}, new(func(any, any) any)),
	expr.Function("isNil", func(p ...any) (any, error) {
		return isNilValue(p[0]), nil
	}, new(func(any) bool)),
}

// CompileCondition compiles a successCondition or failureCondition. The
// program must yield a bool; `result` is the measurement. Helpers: len,
// isNaN, isInf, isNil, default, asInt, asFloat, and expr's built-ins.
// A compiled program is shared: it is read-only once compiled (expr runs
// each in a VM of its own).
func CompileCondition(src string) (*vm.Program, error) {
	if p := compiledConditions.get(src); p != nil {
		return p, nil
	}
	p, err := expr.Compile(src, conditionOptions...)
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", src, unwrapExprError(err))
	}
	compiledConditions.put(src, p)
	return p, nil
}

// compiledConditions keeps programs by source: every canary of a commit
// starts runs of the same conditions, and compiling them again was 2 % of
// the daemon's CPU in a 1,000-rollout commit.
var compiledConditions = conditionCache{programs: map[string]*vm.Program{}}

// maxCachedConditions bounds the cache; when it is full it starts over.
const maxCachedConditions = 1024

type conditionCache struct {
	mu       sync.Mutex
	programs map[string]*vm.Program
}

func (c *conditionCache) get(src string) *vm.Program {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.programs[src]
}

func (c *conditionCache) put(src string, p *vm.Program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.programs) >= maxCachedConditions {
		clear(c.programs)
	}
	c.programs[src] = p
}

// conditionArg matches an argument placeholder inside a condition.
var conditionArg = regexp.MustCompile(`\{\{\s*args\.[A-Za-z0-9_.\-]+\s*\}\}`)

// CheckCondition validates a condition as written in a template, before
// its arguments are known: each {{args.x}} placeholder stands in as the
// number 0 (inside quotes it becomes "0"), which is valid wherever a real
// value can go. The run compiles the substituted text with CompileCondition.
func CheckCondition(src string) error {
	_, err := CompileCondition(conditionArg.ReplaceAllString(src, "0"))
	return err
}

// EvalCondition runs a compiled condition with result bound to the
// measurement. A non-bool outcome or a runtime fault (such as indexing an
// empty vector) is an error, never a silent false.
func EvalCondition(p *vm.Program, result any) (bool, error) {
	out, err := expr.Run(p, conditionEnv{Result: result})
	if err != nil {
		return false, unwrapExprError(err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("condition yields %T, not bool", out)
	}
	return b, nil
}

// unwrapExprError drops expr's multi-line source snippet, which does not
// fit a one-line "file:line: field: reason" diagnostic.
func unwrapExprError(err error) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		if fe.Prev != nil {
			return fmt.Errorf("%s (column %d): %w", fe.Message, fe.Column+1, fe.Prev)
		}
		return fmt.Errorf("%s (column %d)", fe.Message, fe.Column+1)
	}
	return err
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case uint:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, err
		}
		return f, nil
	case nil:
		return 0, errors.New("no value")
	}
	return 0, fmt.Errorf("not a number: %T", v)
}

func isNilValue(v any) bool {
	if v == nil {
		return true
	}
	switch reflect.TypeOf(v).Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface, reflect.Func:
		return reflect.ValueOf(v).IsNil()
	}
	return false
}
