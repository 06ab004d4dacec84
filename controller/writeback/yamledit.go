package writeback

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sluice-dev/sluice/api"
)

// ErrNoRollout means the file holds no Rollout with the key.
var ErrNoRollout = errors.New("no such rollout in the file")

// ErrImageChanged means the Rollout's image is not the one the edit
// expected: someone changed it.
var ErrImageChanged = errors.New("the image is not the expected one")

// errParse marks a file that is not YAML: a search for a Rollout skips it.
var errParse = errors.New("parse")

// imageScalar is where a Rollout's first container image is written: the
// byte range of the scalar (quotes included, anchor and tag excluded).
type imageScalar struct {
	value      string
	style      yaml.Style
	start, end int
	line       int
}

// SetImage returns src with the image of the first container of Rollout
// key changed from `from` to `to`. Every other byte of src stays as it was:
// comments, key order, anchors, other documents, quoting of the rest.
//
// It splices the bytes of that one scalar rather than editing a yaml.Node
// tree and encoding it again: an encoder (yaml.v3's or kyaml's) keeps
// comments and order but re-indents, re-quotes and re-wraps the document,
// so the commit's diff would not be the image line alone. The parser only
// locates the scalar; the new text is written in the scalar's own quoting
// style, and the result is parsed again to check it says `to`.
func SetImage(src []byte, key api.Key, from, to string) ([]byte, error) {
	sc, err := findImage(src, key)
	if err != nil {
		return nil, err
	}
	if sc.value != from {
		return nil, fmt.Errorf("line %d: image %q, want %q: %w", sc.line, sc.value, from, ErrImageChanged)
	}
	for _, style := range []yaml.Style{sc.style, yaml.DoubleQuotedStyle} {
		text, ok := renderScalar(to, style)
		if !ok {
			continue
		}
		out := make([]byte, 0, len(src)+len(text))
		out = append(append(append(out, src[:sc.start]...), text...), src[sc.end:]...)
		if check, err := findImage(out, key); err == nil && check.value == to {
			return out, nil
		}
	}
	return nil, fmt.Errorf("line %d: cannot write image %q in place", sc.line, to)
}

// ImageOf returns the image of the first container of Rollout key in src
// and the line it is on; ErrNoRollout when src holds no such Rollout.
func ImageOf(src []byte, key api.Key) (string, int, error) {
	sc, err := findImage(src, key)
	if err != nil {
		return "", 0, err
	}
	return sc.value, sc.line, nil
}

// findImage parses every document of src and locates the image scalar of
// Rollout key.
func findImage(src []byte, key api.Key) (imageScalar, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return imageScalar{}, ErrNoRollout
		}
		if err != nil {
			return imageScalar{}, fmt.Errorf("%w: %w", errParse, err)
		}
		if len(doc.Content) == 0 || !isRollout(doc.Content[0], key) {
			continue
		}
		n := lookup(doc.Content[0], "spec", "template", "spec", "containers")
		if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
			return imageScalar{}, fmt.Errorf("line %d: rollout %s has no spec.template.spec.containers", doc.Content[0].Line, key)
		}
		img := lookup(n.Content[0], "image")
		if img == nil {
			return imageScalar{}, fmt.Errorf("line %d: rollout %s: spec.template.spec.containers[0] has no image", n.Content[0].Line, key)
		}
		return locate(src, img)
	}
}

func isRollout(root *yaml.Node, key api.Key) bool {
	kind, name, ns := lookup(root, "kind"), lookup(root, "metadata", "name"), lookup(root, "metadata", "namespace")
	namespace := "default"
	if ns != nil && ns.Value != "" {
		namespace = ns.Value
	}
	return kind != nil && kind.Value == "Rollout" && name != nil && name.Value == key.Name && namespace == key.Namespace
}

// lookup follows mapping keys from n (through aliases, for navigation
// only); nil when a key is missing.
func lookup(n *yaml.Node, path ...string) *yaml.Node {
	for _, k := range path {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// locate finds the bytes of scalar n in src. An alias is refused: editing
// the anchor it names would change every other use of it.
func locate(src []byte, n *yaml.Node) (imageScalar, error) {
	if n.Kind == yaml.AliasNode {
		return imageScalar{}, fmt.Errorf("line %d: the image is the alias *%s: edit the anchor by hand", n.Line, n.Value)
	}
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return imageScalar{}, fmt.Errorf("line %d: the image is not a one-line scalar", n.Line)
	}
	start, ok := offset(src, n.Line, n.Column)
	if !ok {
		return imageScalar{}, fmt.Errorf("line %d: image position out of range", n.Line)
	}
	start = skipProperties(src, start)
	end, ok := scalarEnd(src, start, n)
	if !ok {
		return imageScalar{}, fmt.Errorf("line %d: the image is not a one-line scalar", n.Line)
	}
	return imageScalar{value: n.Value, style: n.Style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle), start: start, end: end, line: n.Line}, nil
}

// offset turns the parser's 1-based line and column (counted in
// characters, not bytes) into a byte offset.
func offset(src []byte, line, col int) (int, bool) {
	i := 0
	for l := 1; l < line; l++ {
		nl := bytes.IndexByte(src[i:], '\n')
		if nl < 0 {
			return 0, false
		}
		i += nl + 1
	}
	for c := 1; c < col; c++ {
		if i >= len(src) || src[i] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(src[i:])
		i += size
	}
	return i, true
}

// skipProperties steps over an anchor (&name) or tag (!!str) written
// before the scalar: the parser may place the node there.
func skipProperties(src []byte, i int) int {
	for i < len(src) && (src[i] == '&' || src[i] == '!') {
		for i < len(src) && src[i] != ' ' && src[i] != '\t' && src[i] != '\n' {
			i++
		}
		for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
			i++
		}
	}
	return i
}

// scalarEnd is the end of the scalar starting at i, which must end on its
// line.
func scalarEnd(src []byte, i int, n *yaml.Node) (int, bool) {
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		for j := i + 1; j < len(src) && src[j] != '\n'; j++ {
			switch src[j] {
			case '\\':
				j++
			case '"':
				return j + 1, true
			}
		}
	case n.Style&yaml.SingleQuotedStyle != 0:
		for j := i + 1; j < len(src) && src[j] != '\n'; j++ {
			if src[j] == '\'' {
				if j+1 < len(src) && src[j+1] == '\'' {
					j++
					continue
				}
				return j + 1, true
			}
		}
	default:
		end := i + len(n.Value)
		if end <= len(src) && string(src[i:end]) == n.Value {
			return end, true
		}
	}
	return 0, false
}

// renderScalar writes v in style; false when the style cannot hold it on
// one line.
func renderScalar(v string, style yaml.Style) (string, bool) {
	if strings.ContainsAny(v, "\n\r") {
		return "", false
	}
	switch style {
	case yaml.DoubleQuotedStyle:
		return strconv.Quote(v), true
	case yaml.SingleQuotedStyle:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'", true
	default:
		// Plain: SetImage re-parses and falls back to double quotes when
		// v would read as something else (a number, a comment, a map).
		return v, v != "" && strings.TrimSpace(v) == v
	}
}
