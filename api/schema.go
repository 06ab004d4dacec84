package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
)

// schemaWalk walks a YAML node tree alongside the Go type it will be
// decoded into. It records the line of every field path (so validation
// can name the line of the offending key), warns about unknown fields with
// their line, reports values of the wrong shape (a string where an integer
// belongs) before the decoder turns them into a line-less error, and
// writes the document as JSON for encoding/json to decode into the Argo
// types.
//
// This is written by hand because neither sigs.k8s.io/yaml nor yaml.v3
// reports more than the first unknown field, and neither gives the line of
// a field in a typed decode. The JSON it writes follows sigs.k8s.io/yaml's
// YAML-to-JSON rules (scalars bound for string fields become strings),
// which the Kubernetes types expect; producing it during this walk saves
// parsing every document a second time, which was half the load time
// (BenchmarkLoad1000).
type schemaWalk struct {
	json bytes.Buffer
	// lines is every field path's line while the document is decoded;
	// frozen holds them afterwards (freeze).
	lines  map[string]int
	frozen *lineIndex
	diags  []Diagnostic
	// shapeErrors counts wrong-shape values: the document must not be decoded.
	shapeErrors int
	// unknown lists the unknown keys found under each object path.
	unknown map[string][]string
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

// pluginSchemas gives plugin configuration blocks (free-form
// map[string]json.RawMessage in the Argo types) the shape sluice reads.
var pluginSchemas = map[string]reflect.Type{
	XDSPluginName:   reflect.TypeFor[xdsConfigDoc](),
	JudgePluginName: reflect.TypeFor[judgeConfigDoc](),
}

func newSchemaWalk() *schemaWalk {
	return &schemaWalk{lines: map[string]int{}, unknown: map[string][]string{}}
}

// line returns the line of path, or of its nearest recorded ancestor.
func (w *schemaWalk) line(path string) int {
	for {
		if l, ok := w.lookup(path); ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			l, _ := w.lookup("")
			return l
		}
		path = path[:i]
	}
}

// has reports whether path was written in the document.
func (w *schemaWalk) has(path string) bool {
	_, ok := w.lookup(path)
	return ok
}

func (w *schemaWalk) lookup(path string) (int, bool) {
	if w.frozen != nil {
		return w.frozen.lookup(path)
	}
	l, ok := w.lines[path]
	return l, ok
}

// freeze keeps the lines in their compact form once nothing more is noted.
func (w *schemaWalk) freeze() {
	idx := freezeLines(w.lines)
	w.frozen, w.lines = &idx, nil
}

// note keeps the line of path while the document is decoded; freeze
// interns the paths.
func (w *schemaWalk) note(path string, line int) {
	w.lines[path] = line
}

func childPath(parent, key string) string {
	if !isSimpleKey(key) {
		return parent + "[" + key + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// isSimpleKey reports whether a key can follow a dot in a field path
// ([A-Za-z_][A-Za-z0-9_-]*); others are written in brackets.
func isSimpleKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || (c != '-' && (c < '0' || c > '9'))) {
			return false
		}
	}
	return k != ""
}

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
	n = resolveAlias(n)
	w.note(path, line)
	if isNull(n) {
		w.json.WriteString("null")
		return
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || t == rawMessageType || decodesItself(t) {
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
		w.json.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				w.json.WriteByte(',')
			}
			w.walk(item, t.Elem(), indexPath(path, i), item.Line)
		}
		w.json.WriteByte(']')
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.shapeError(path, line, "must be a map, got %s", describe(n))
			return
		}
		w.json.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			elem := t.Elem()
			if elem == rawMessageType {
				if s, ok := pluginSchemas[k.Value]; ok {
					elem = s
				}
			}
			w.key(i > 0, k.Value)
			w.walk(v, elem, childPath(path, k.Value), k.Line)
		}
		w.json.WriteByte('}')
	default:
		w.scalar(n, t.Kind(), path, line)
	}
}

// key writes a JSON object key, preceded by a comma unless it is first.
func (w *schemaWalk) key(comma bool, k string) {
	if comma {
		w.json.WriteByte(',')
	}
	writeJSONString(&w.json, k)
	w.json.WriteByte(':')
}

func (w *schemaWalk) walkStruct(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		w.shapeError(path, n.Line, "must be an object, got %s", describe(n))
		return
	}
	w.json.WriteByte('{')
	w.structFields(n, t, path, false)
	w.json.WriteByte('}')
}

// structFields writes the known fields of mapping n; comma says whether a
// field was already written. It returns whether any field was written.
func (w *schemaWalk) structFields(n *yaml.Node, t reflect.Type, path string, comma bool) bool {
	fields := jsonFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "<<" { // YAML merge key: its mapping's fields belong here.
			if m := resolveAlias(v); m.Kind == yaml.MappingNode {
				comma = w.structFields(m, t, path, comma)
			}
			continue
		}
		ft, ok := fields[k.Value]
		if !ok {
			w.warn(childPath(path, k.Value), k.Line, "unknown field %q (ignored)", k.Value)
			w.unknown[path] = append(w.unknown[path], k.Value)
			w.recordLines(v, childPath(path, k.Value))
			continue
		}
		w.key(comma, k.Value)
		comma = true
		w.walk(v, ft, childPath(path, k.Value), k.Line)
	}
	return comma
}

// record writes a subtree that has no schema as plain JSON and notes its lines.
func (w *schemaWalk) record(n *yaml.Node, path string) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		w.json.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := childPath(path, n.Content[i].Value)
			w.note(p, n.Content[i].Line)
			w.key(i > 0, n.Content[i].Value)
			w.record(n.Content[i+1], p)
		}
		w.json.WriteByte('}')
	case yaml.SequenceNode:
		w.json.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				w.json.WriteByte(',')
			}
			p := indexPath(path, i)
			w.note(p, item.Line)
			w.record(item, p)
		}
		w.json.WriteByte(']')
	default:
		w.plainScalar(n)
	}
}

// recordLines notes the lines of a subtree that is not decoded.
func (w *schemaWalk) recordLines(n *yaml.Node, path string) {
	n = resolveAlias(n)
	for i := 0; i+1 < len(n.Content) && n.Kind == yaml.MappingNode; i += 2 {
		p := childPath(path, n.Content[i].Value)
		w.note(p, n.Content[i].Line)
		w.recordLines(n.Content[i+1], p)
	}
	for i, item := range n.Content {
		if n.Kind == yaml.SequenceNode {
			w.note(indexPath(path, i), item.Line)
			w.recordLines(item, indexPath(path, i))
		}
	}
}

// plainScalar writes a scalar as its YAML tag says: numbers, booleans and
// null as JSON literals, everything else as a string.
func (w *schemaWalk) plainScalar(n *yaml.Node) {
	switch n.ShortTag() {
	case "!!null":
		w.json.WriteString("null")
		return
	case "!!bool":
		if b, err := strconv.ParseBool(n.Value); err == nil {
			w.json.WriteString(strconv.FormatBool(b))
			return
		}
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			w.json.WriteString(strconv.FormatInt(i, 10))
			return
		}
	case "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			w.json.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			return
		}
	}
	writeJSONString(&w.json, n.Value)
}

// scalar checks that n fits a field of kind k and writes it.
func (w *schemaWalk) scalar(n *yaml.Node, k reflect.Kind, path string, line int) {
	if n.Kind != yaml.ScalarNode {
		w.shapeError(path, line, "must be a single value, got %s", describe(n))
		return
	}
	tag := n.ShortTag()
	switch k {
	case reflect.String:
		writeJSONString(&w.json, n.Value)
		return
	case reflect.Bool:
		if tag != "!!bool" {
			w.shapeError(path, line, "must be true or false, got %q", n.Value)
			return
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err := strconv.ParseInt(n.Value, 0, 64); tag != "!!int" || err != nil {
			w.shapeError(path, line, "must be an integer, got %q", n.Value)
			return
		}
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, 64)
		if (tag != "!!int" && tag != "!!float") || err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			w.shapeError(path, line, "must be a finite number, got %q", n.Value)
			return
		}
	}
	w.plainScalar(n)
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
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

var selfDecoding sync.Map // reflect.Type -> bool

// decodesItself reports whether *t implements json.Unmarshaler (IntOrString,
// Quantity, Time, ...): such values are decoded as they are, not walked.
func decodesItself(t reflect.Type) bool {
	if v, ok := selfDecoding.Load(t); ok {
		return v.(bool)
	}
	v := reflect.PointerTo(t).Implements(jsonUnmarshaler)
	selfDecoding.Store(t, v)
	return v
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
