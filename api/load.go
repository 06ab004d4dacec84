package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	yaml "go.yaml.in/yaml/v3"
)

// Kinds sluice reads (group argoproj.io, version v1alpha1).
const (
	KindRollout                 = "Rollout"
	KindAnalysisTemplate        = "AnalysisTemplate"
	KindClusterAnalysisTemplate = "ClusterAnalysisTemplate"
	argoGroup                   = "argoproj.io"
	argoAPIVersion              = "argoproj.io/v1alpha1"
)

// SkippedDoc is a document of a kind sluice does not read.
type SkippedDoc struct {
	File       string
	Line       int
	APIVersion string
	Kind       string
}

// document is one YAML document of a file, with what the schema walk found.
type document struct {
	file string
	line int
	kind string
	walk *schemaWalk
	node *yaml.Node
}

// diag makes a diagnostic for path in this document.
func (d *document) diag(sev Severity, path, format string, args ...any) Diagnostic {
	return Diagnostic{File: d.file, Line: d.walk.line(path), Field: path, Message: fmt.Sprintf(format, args...), Severity: sev}
}

// Load parses, validates and converts strategy files. It never fails as a
// whole: every problem becomes a Diagnostic, and what is valid is returned.
// Files are parsed in parallel; the result does not depend on it.
func Load(sources []Source) *Set {
	return assemble(sources, parseAll(sources, Limits{}.withDefaults(), nil), ModeStandalone)
}

// parsed is what one file contributes before the set-wide checks
// (duplicates, template references). It depends only on the file's bytes,
// so a Loader can reuse it while the file is unchanged. It is read-only
// once built.
type parsed struct {
	rollouts   []*rolloutDoc
	templates  []*templateDoc
	skipped    []SkippedDoc
	diags      Diagnostics
	unreadable bool
}

// parseFile parses one file. A file over the size limit is not parsed, and
// a panic while parsing (a bug, which a hostile file must not turn into a
// crash) makes the file unreadable with the panic as its error: parsing
// runs on worker goroutines, where an unrecovered panic ends the process.
func parseFile(src Source, limits Limits) (p *parsed) {
	if msg := limits.fileTooLarge(src.size()); msg != "" {
		return unreadableFile(src.Name, msg)
	}
	defer func() {
		if r := recover(); r != nil {
			p = unreadableFile(src.Name, fmt.Sprintf("internal error while loading this file: %v", r))
		}
	}()
	p = &parsed{}
	docs, diags, ok := splitDocuments(src)
	p.diags, p.unreadable = diags, !ok
	for _, d := range docs {
		if err := checkAliases(d.node); err != nil {
			// Which objects the document holds is unknown: the file is
			// unreadable, so none of them is taken for deleted.
			p.diags = append(p.diags, Diagnostic{File: d.file, Line: err.line, Field: err.field, Message: err.msg, Severity: SeverityError})
			p.unreadable = true
			continue
		}
		r, t, skipped, diags := decodeDocument(d)
		p.diags = append(p.diags, diags...)
		switch {
		case skipped != nil:
			p.skipped = append(p.skipped, *skipped)
		case r != nil:
			p.rollouts = append(p.rollouts, r)
		case t != nil:
			p.templates = append(p.templates, t)
		}
	}
	for _, d := range docs {
		d.release()
	}
	return p
}

// release drops the YAML tree and the JSON it was decoded through once the
// document is decoded, and freezes its line index: only that is read
// later, by the set-wide checks, and a Loader keeps parsed files for
// reuse. At 1,000 rollouts the trees were a fifth of the daemon's live
// heap.
func (d *document) release() {
	d.node = nil
	if d.walk != nil {
		d.walk.json = bytes.Buffer{}
		d.walk.freeze()
	}
}

func unreadableFile(name, msg string) *parsed {
	return &parsed{unreadable: true, diags: Diagnostics{{File: name, Message: msg, Severity: SeverityError}}}
}

// parseAll parses every source on up to GOMAXPROCS goroutines; reuse, when
// not nil, may supply an already parsed file.
func parseAll(sources []Source, limits Limits, reuse func(Source) *parsed) []*parsed {
	out := make([]*parsed, len(sources))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(sources)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if reuse != nil {
					out[i] = reuse(sources[i])
				}
				if out[i] == nil {
					out[i] = parseFile(sources[i], limits)
				}
			}
		}()
	}
	for i := range sources {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// assemble runs the set-wide checks over parsed files, in source order.
func assemble(sources []Source, files []*parsed, mode Mode) *Set {
	set := &Set{}
	var rollouts []*rolloutDoc
	var templates []*templateDoc
	for i, p := range files {
		set.Files = append(set.Files, sources[i].Name)
		if p.unreadable {
			set.Unreadable = append(set.Unreadable, sources[i].Name)
		}
		set.Diagnostics = append(set.Diagnostics, p.diags...)
		set.Skipped = append(set.Skipped, p.skipped...)
		rollouts = append(rollouts, p.rollouts...)
		templates = append(templates, p.templates...)
	}
	idx := indexTemplates(set, templates, mode)
	acceptRollouts(set, rollouts, idx, mode)
	sortSet(set)
	return set
}

var yamlErrorLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// splitDocuments parses every YAML document of a file. ok is false when a
// syntax error stopped the parse, so objects after it may be missing.
func splitDocuments(src Source) ([]*document, Diagnostics, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(src.Data))
	var docs []*document
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil, true
		}
		if err != nil {
			return docs, Diagnostics{syntaxDiagnostic(src.Name, err)}, false
		}
		if len(n.Content) == 0 || isNull(n.Content[0]) {
			continue // empty document
		}
		docs = append(docs, &document{file: src.Name, node: n.Content[0], line: n.Content[0].Line})
	}
}

func syntaxDiagnostic(file string, err error) Diagnostic {
	d := Diagnostic{File: file, Message: "invalid YAML: " + err.Error(), Severity: SeverityError}
	if m := yamlErrorLine.FindStringSubmatch(err.Error()); m != nil {
		d.Line, _ = strconv.Atoi(m[1])
		d.Message = "invalid YAML: " + m[2]
	}
	return d
}

// decodeDocument reads one document as a Rollout or template, or skips it.
func decodeDocument(d *document) (*rolloutDoc, *templateDoc, *SkippedDoc, Diagnostics) {
	if d.node.Kind != yaml.MappingNode {
		return nil, nil, nil, Diagnostics{{File: d.file, Line: d.line, Message: "document is not a YAML map", Severity: SeverityError}}
	}
	apiVersion, kind := scalarField(d.node, "apiVersion"), scalarField(d.node, "kind")
	group, _, _ := strings.Cut(apiVersion, "/")
	readable := kind == KindRollout || kind == KindAnalysisTemplate || kind == KindClusterAnalysisTemplate
	if group != argoGroup || !readable {
		return nil, nil, &SkippedDoc{File: d.file, Line: d.line, APIVersion: apiVersion, Kind: kind}, nil
	}
	d.kind = kind
	d.walk = newSchemaWalk()
	d.walk.lines["apiVersion"] = keyLine(d.node, "apiVersion")
	if apiVersion != argoAPIVersion {
		return nil, nil, nil, Diagnostics{d.diag(SeverityError, "apiVersion", "unsupported apiVersion %q: sluice reads %s", apiVersion, argoAPIVersion)}
	}
	switch kind {
	case KindRollout:
		var ro v1alpha1.Rollout
		if diags, ok := d.decode(&ro); !ok {
			return nil, nil, nil, diags
		} else {
			return &rolloutDoc{doc: d, obj: &ro}, nil, nil, diags
		}
	default:
		var spec v1alpha1.AnalysisTemplateSpec
		var meta objectMeta
		var diags Diagnostics
		var ok bool
		if kind == KindClusterAnalysisTemplate {
			var ct v1alpha1.ClusterAnalysisTemplate
			diags, ok = d.decode(&ct)
			spec, meta = ct.Spec, objectMeta{ct.Name, ct.Namespace}
		} else {
			var at v1alpha1.AnalysisTemplate
			diags, ok = d.decode(&at)
			spec, meta = at.Spec, objectMeta{at.Name, at.Namespace}
		}
		if !ok {
			return nil, nil, nil, diags
		}
		return nil, &templateDoc{doc: d, spec: spec, meta: meta, cluster: kind == KindClusterAnalysisTemplate}, nil, diags
	}
}

type objectMeta struct{ name, namespace string }

// decode walks the document against obj's type, then decodes the JSON the
// walk wrote into obj. ok is false when the document has values of the
// wrong shape or does not decode.
func (d *document) decode(obj any) (Diagnostics, bool) {
	d.walk.walk(d.node, reflect.TypeOf(obj), "", d.line)
	diags := d.walk.takeDiagnostics(d)
	if d.walk.shapeErrors > 0 {
		return diags, false
	}
	if err := json.Unmarshal(d.walk.json.Bytes(), obj); err != nil {
		return append(diags, Diagnostic{File: d.file, Line: d.line, Message: "cannot decode: " + err.Error(), Severity: SeverityError}), false
	}
	return diags, true
}

// takeDiagnostics stamps the walk's findings with the document's file.
func (w *schemaWalk) takeDiagnostics(d *document) Diagnostics {
	out := make(Diagnostics, len(w.diags))
	for i, x := range w.diags {
		x.File = d.file
		out[i] = x
	}
	w.diags = nil
	return out
}

func keyLine(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return m.Line
}

func scalarField(m *yaml.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}

func sortSet(set *Set) {
	sort.Slice(set.Rollouts, func(i, j int) bool { return set.Rollouts[i].Key.String() < set.Rollouts[j].Key.String() })
	sort.Slice(set.Templates, func(i, j int) bool {
		a, b := set.Templates[i], set.Templates[j]
		if a.ClusterScoped != b.ClusterScoped {
			return !a.ClusterScoped
		}
		return a.Key.String() < b.Key.String()
	})
	sort.Slice(set.Rejected, func(i, j int) bool { return set.Rejected[i].Key.String() < set.Rejected[j].Key.String() })
	sort.SliceStable(set.Diagnostics, func(i, j int) bool {
		a, b := set.Diagnostics[i], set.Diagnostics[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
}
