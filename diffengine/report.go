package diffengine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// Report is the diff of two loaded strategy trees as `sluice diff` shows
// it: the rollouts and templates that changed, and the load errors of each
// side.
type Report struct {
	Rollouts  []Change
	Templates []TemplateChange
	// OldErrors and NewErrors are error diagnostics of each side; objects
	// they reject are not in the diff (see DiffSets).
	OldErrors, NewErrors api.Diagnostics
}

// NewReport diffs two sets with no live state and keeps what changed.
func NewReport(old, new *api.Set) Report {
	var r Report
	for _, c := range DiffSets(old, new, nil) {
		if c.Class != Unchanged {
			r.Rollouts = append(r.Rollouts, c)
		}
	}
	for _, c := range DiffSetTemplates(old, new) {
		if c.Class != Unchanged {
			r.Templates = append(r.Templates, c)
		}
	}
	r.OldErrors, r.NewErrors = orEmpty(old).Diagnostics.Errors(), orEmpty(new).Diagnostics.Errors()
	return r
}

// Changed reports whether anything differs.
func (r Report) Changed() bool { return len(r.Rollouts)+len(r.Templates) > 0 }

// MarshalJSON writes one array: the rollout changes
// ({kind, rollout, class, risky, reasons, changes}) then the template
// changes ({kind, template, class, changes}).
func (r Report) MarshalJSON() ([]byte, error) {
	entries := make([]any, 0, len(r.Rollouts)+len(r.Templates))
	for _, c := range r.Rollouts {
		entries = append(entries, c)
	}
	for _, c := range r.Templates {
		entries = append(entries, c)
	}
	return marshalPlain(entries)
}

// palette holds the escape sequences of the text output; empty when
// colour is off.
type palette struct{ add, del, mod, risky, bold, reset string }

func newPalette(color bool) palette {
	if !color {
		return palette{}
	}
	return palette{add: "\x1b[32m", del: "\x1b[31m", mod: "\x1b[33m", risky: "\x1b[1;31m", bold: "\x1b[1m", reset: "\x1b[0m"}
}

// WriteText writes the human form: one header line per rollout or
// template, then its risk reasons and field changes, indented. color adds
// ANSI colours (for a terminal).
func (r Report) WriteText(w io.Writer, color bool) error {
	p := newPalette(color)
	var b bytes.Buffer
	for _, c := range r.Rollouts {
		sign, col := classSign(c.Class, p)
		fmt.Fprintf(&b, "%s%s %s%s %s", col, sign, p.bold, c.Rollout, p.reset)
		fmt.Fprintf(&b, "%s", c.Class)
		if c.Risky {
			fmt.Fprintf(&b, "  %sRISKY: needs approval while a canary runs%s", p.risky, p.reset)
		}
		b.WriteByte('\n')
		if c.Class == NewVersion {
			fmt.Fprintf(&b, "    version %s → %s\n", c.Old.Version, c.New.Version)
		}
		for _, reason := range c.Reasons {
			fmt.Fprintf(&b, "    %s! %s%s\n", p.risky, reason, p.reset)
		}
		writeFieldChanges(&b, c.Changes, p)
	}
	for _, c := range r.Templates {
		sign, col := classSign(c.Class, p)
		kind, name := "AnalysisTemplate", c.Template.String()
		if c.ClusterScoped {
			kind, name = "ClusterAnalysisTemplate", c.Template.Name
		}
		fmt.Fprintf(&b, "%s%s %s %s%s%s %s\n", col, sign, kind, p.bold, name, p.reset, c.Class)
		if c.Class != Added && c.Class != Removed {
			writeFieldChanges(&b, c.Changes, p)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func classSign(c Class, p palette) (string, string) {
	switch c {
	case Added:
		return "+", p.add
	case Removed:
		return "-", p.del
	}
	return "~", p.mod
}

func writeFieldChanges(b *bytes.Buffer, changes []FieldChange, p palette) {
	for _, fc := range changes {
		switch fc.Kind {
		case KindAdded:
			fmt.Fprintf(b, "    %s+ %s: %s%s\n", p.add, fc.Path, flow(fc.New), p.reset)
		case KindRemoved:
			fmt.Fprintf(b, "    %s- %s: %s%s\n", p.del, fc.Path, flow(fc.Old), p.reset)
		case KindMoved:
			fmt.Fprintf(b, "    %s↕ %s: moved from position %v to %v%s\n", p.mod, fc.Path, fc.Old, fc.New, p.reset)
		default:
			fmt.Fprintf(b, "    %s~ %s: %s → %s%s\n", p.mod, fc.Path, flow(fc.Old), flow(fc.New), p.reset)
		}
	}
}

// flow renders a value on one line: strings bare, everything else as
// compact JSON.
func flow(v any) string {
	if s, ok := v.(string); ok && s != "" && !strings.ContainsAny(s, "\n\"") {
		return s
	}
	out, err := marshalPlain(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(out)
}

var _ json.Marshaler = Report{}
