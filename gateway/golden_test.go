package gateway

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// goldenJSON compares got with testdata/name, rewriting it with -update.
func goldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

// stableJSON renders messages as indented JSON with a stable layout
// (protojson randomizes whitespace on purpose).
func stableJSON(t *testing.T, fields []namedMsg) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, f := range fields {
		if i > 0 {
			buf.WriteString(",")
		}
		k, _ := json.Marshal(f.name)
		buf.Write(k)
		buf.WriteString(":")
		if f.list != nil {
			buf.WriteString("[")
			for j, m := range f.list {
				if j > 0 {
					buf.WriteString(",")
				}
				buf.Write(protoJSON(t, m))
			}
			buf.WriteString("]")
			continue
		}
		buf.Write(protoJSON(t, f.msg))
	}
	buf.WriteString("}")
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		t.Fatalf("indent: %v\n%s", err, buf.Bytes())
	}
	out.WriteString("\n")
	return out.Bytes()
}

type namedMsg struct {
	name string
	msg  proto.Message
	list []proto.Message
}

func protoJSON(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatalf("protojson: %v", err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatal(err)
	}
	return c.Bytes()
}
