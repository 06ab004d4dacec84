package view

import (
	"bytes"
	"io"
	"text/tabwriter"
)

// table is a tabwriter whose output loses the trailing blanks that empty
// last cells leave, so golden files and terminals see clean lines.
type table struct {
	*tabwriter.Writer
	buf bytes.Buffer
	out io.Writer
}

func newTable(w io.Writer, padding int) *table {
	t := &table{out: w}
	t.Writer = tabwriter.NewWriter(&t.buf, 0, 4, padding, ' ', 0)
	return t
}

// Flush writes the aligned, trimmed lines to the underlying writer.
func (t *table) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	for _, line := range bytes.SplitAfter(t.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		nl := bytes.HasSuffix(line, []byte("\n"))
		line = bytes.TrimRight(line, " \n")
		if nl {
			line = append(line, '\n')
		}
		if _, err := t.out.Write(line); err != nil {
			return err
		}
	}
	t.buf.Reset()
	return nil
}
