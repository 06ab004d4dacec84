package analysis

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// argRef matches an argument placeholder. Argo writes "{{args.name}}";
// inner spaces are tolerated because people type them.
var argRef = regexp.MustCompile(`\{\{\s*args\.([A-Za-z0-9_.\-]+)\s*\}\}`)

// args holds the resolved argument values of one run.
type args map[string]string

// resolveArgs merges, from weakest to strongest: the templates' declared
// defaults, sluice's built-ins (canary, stable, rollout, namespace) for
// names the step does not set, and the step's own values. An argument a
// template declares without any value is an error: the run cannot start.
func resolveArgs(templates []*api.AnalysisTemplate, given []api.Arg, builtins map[string]string) (args, error) {
	out := args{}
	declared := map[string]bool{}
	for _, t := range templates {
		for _, a := range t.Args {
			declared[a.Name] = true
			if a.Value != nil {
				out[a.Name] = *a.Value
			}
		}
	}
	for k, v := range builtins {
		out[k] = v
	}
	for _, a := range given {
		if a.Value == "" && a.ValueFrom != "" {
			return nil, fmt.Errorf("arg %s: valueFrom %s is not supported by sluice", a.Name, a.ValueFrom)
		}
		out[a.Name] = a.Value
	}
	for name := range declared {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("arg %s: no value given", name)
		}
	}
	return out, nil
}

// expand replaces every {{args.x}} in s. An unknown name is an error,
// never an empty string silently spliced into a query.
func (a args) expand(s string) (string, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	var missing []string
	out := argRef.ReplaceAllStringFunc(s, func(m string) string {
		name := argRef.FindStringSubmatch(m)[1]
		v, ok := a[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown arg %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// intValue resolves an IntOrArg.
func (a args) intValue(v api.IntOrArg) (int, error) {
	if v.Arg == "" {
		return v.Value, nil
	}
	s, err := a.expand(v.Arg)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

// expandAll expands several strings in place, stopping at the first error.
func (a args) expandAll(fields ...*string) error {
	for _, f := range fields {
		s, err := a.expand(*f)
		if err != nil {
			return err
		}
		*f = s
	}
	return nil
}

// expandMap returns a copy of m with keys and values expanded.
func (a args) expandMap(m map[string]string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		ek, err := a.expand(k)
		if err != nil {
			return nil, err
		}
		ev, err := a.expand(v)
		if err != nil {
			return nil, err
		}
		out[ek] = ev
	}
	return out, nil
}
