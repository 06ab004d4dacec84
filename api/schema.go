package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// schemaWalk walks a YAML node tree alongside the Go type it will be
// decoded into. It records the line of every field path (so validation
// can name the line of the offending key), warns about unknown fields with
// their line, and reports values of the wrong shape (a string where an
// integer belongs) before the decoder turns them into a line-less error.
//
// This is written by hand because neither sigs.k8s.io/yaml nor yaml.v3
// reports more than the first unknown field, and neither gives the line of
// a field in a typed decode.
type schemaWalk struct {
	lines map[string]int
	diags []Diagnostic
	// shapeErrors counts wrong-shape values: the document must not be decoded.
	shapeErrors int
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	simpleKey       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// pluginSchemas gives plugin configuration blocks (free-form
// map[string]json.RawMessage in the Argo types) the shape sluice reads.
var pluginSchemas = map[string]reflect.Type{
	XDSPluginName:   reflect.TypeFor[xdsConfigDoc](),
	JudgePluginName: reflect.TypeFor[judgeConfigDoc](),
}

func newSchemaWalk() *schemaWalk { return &schemaWalk{lines: map[string]int{}} }

// line returns the line of path, or of its nearest recorded ancestor.
func (w *schemaWalk) line(path string) int {
	for {
		if l, ok := w.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return w.lines[""]
		}
		path = path[:i]
	}
}

// has reports whether path was written in the document.
func (w *schemaWalk) has(path string) bool {
	_, ok := w.lines[path]
	return ok
}

func childPath(parent, key string) string {
	if !simpleKey.MatchString(key) {
		return parent + "[" + key + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

func (w *schemaWalk) warn(path string, line int, format string, args ...any) {
	w.diags = append(w.diags, Diagnostic{Line: line, Field: path, Message: fmt.Sprintf(format, args...), Severity: SeverityWarning})
}

func (w *schemaWalk) shapeError(path string, line int, format string, args ...any) {
	w.shapeErrors++
	w.diags = append(w.diags, Diagnostic{Line: line, Field: path, Message: fmt.Sprintf(format, args...), Severity: SeverityError})
}

// walk visits n, which sits at path and will be decoded into t. line is the
// line of the key that holds n (or of n itself for list items).
func (w *schemaWalk) walk(n *yaml.Node, t reflect.Type, path string, line int) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	w.lines[path] = line
	if isNull(n) {
		return
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || t == rawMessageType || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		w.record(n, path)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		w.walkStruct(n, t, path)
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			w.shapeError(path, line, "must be a list, got %s", describe(n))
			return
		}
		for i, item := range n.Content {
			w.walk(item, t.Elem(), indexPath(path, i), item.Line)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.shapeError(path, line, "must be a map, got %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			elem := t.Elem()
			if elem == rawMessageType {
				if s, ok := pluginSchemas[k.Value]; ok {
					elem = s
				}
			}
			w.walk(v, elem, childPath(path, k.Value), k.Line)
		}
	default:
		w.checkScalar(n, t.Kind(), path, line)
	}
}

func (w *schemaWalk) walkStruct(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		w.shapeError(path, n.Line, "must be an object, got %s", describe(n))
		return
	}
	fields := jsonFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "<<" { // YAML merge key: its mapping's fields belong here.
			w.walkStruct(resolveAlias(v), t, path)
			continue
		}
		ft, ok := fields[k.Value]
		if !ok {
			w.warn(childPath(path, k.Value), k.Line, "unknown field %q (ignored)", k.Value)
			w.record(v, childPath(path, k.Value))
			continue
		}
		w.walk(v, ft, childPath(path, k.Value), k.Line)
	}
}

// record notes the lines of a subtree that has no schema.
func (w *schemaWalk) record(n *yaml.Node, path string) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := childPath(path, n.Content[i].Value)
			w.lines[p] = n.Content[i].Line
			w.record(n.Content[i+1], p)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := indexPath(path, i)
			w.lines[p] = item.Line
			w.record(item, p)
		}
	}
}

func (w *schemaWalk) checkScalar(n *yaml.Node, k reflect.Kind, path string, line int) {
	if n.Kind != yaml.ScalarNode {
		w.shapeError(path, line, "must be a single value, got %s", describe(n))
		return
	}
	tag := n.ShortTag()
	switch k {
	case reflect.Bool:
		if tag != "!!bool" {
			w.shapeError(path, line, "must be true or false, got %q", n.Value)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if tag != "!!int" {
			w.shapeError(path, line, "must be an integer, got %q", n.Value)
		}
	case reflect.Float32, reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			w.shapeError(path, line, "must be a number, got %q", n.Value)
		}
	}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names of t's fields (inline embedded structs
// flattened, as encoding/json does) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	addJSONFields(t, out)
	fieldCache.Store(t, out)
	return out
}

func addJSONFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addJSONFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}
