package api

import (
	"fmt"
	"strings"
)

// Severity says whether a diagnostic rejects the object or only informs.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Diagnostic is a load or validation finding, printed as
// "file:line: field.path: message".
type Diagnostic struct {
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Field    string   `json:"field"`
	Message  string   `json:"message"`
	Severity Severity `json:"severity"`
}

func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Severity == SeverityWarning {
		b.WriteString("warning: ")
	}
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Line)
	}
	b.WriteString(": ")
	if d.Field != "" {
		b.WriteString(d.Field)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// Error makes an error-severity Diagnostic usable as an error.
func (d Diagnostic) Error() string { return d.String() }

// Diagnostics is a list of findings.
type Diagnostics []Diagnostic

// Errors returns only the error-severity findings.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(SeverityError) }

// Warnings returns only the warnings.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(SeverityWarning) }

// HasErrors reports whether any finding is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}
