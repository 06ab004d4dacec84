package writeback

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// multiDoc has comments, anchors, an alias, flow style, other documents and
// another Rollout whose image is the same: only checkout's line may change.
const multiDoc = `# header comment
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: rate}   # flow map
spec:
  metrics: []
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: other
spec:
  template:
    spec:
      containers:
      - {name: app, image: "shop/checkout:v2"}
---
# the one to edit
kind: Rollout          # key order: kind first
apiVersion: argoproj.io/v1alpha1
metadata:
  namespace: default
  name: checkout
  labels: &labels {app: checkout, tier: "web"}
spec:
  selector:
    matchLabels: *labels
  template:
    metadata:
      labels: *labels
    spec:
      containers:
        - name: app
          image: &img "shop/checkout:v2"   # bumped by CI
          env: [{name: A, value: 'x'}]
        - name: sidecar
          image: shop/sidecar:v2
...
---
kind: Rollout
metadata: {name: checkout, namespace: other}
spec: {template: {spec: {containers: [{image: shop/checkout:v2}]}}}
`

func TestSetImage(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		key      api.Key
		wantLine string // the edited line, after the edit
		wantErr  error
	}{
		{name: "multi-document with comments and anchors", src: multiDoc, key: api.Key{Namespace: "default", Name: "checkout"},
			wantLine: `          image: &img "shop/checkout:v1"   # bumped by CI`},
		{name: "flow style in another namespace", src: multiDoc, key: api.Key{Namespace: "other", Name: "checkout"},
			wantLine: `spec: {template: {spec: {containers: [{image: shop/checkout:v1}]}}}`},
		{name: "flow map, double quoted", src: multiDoc, key: api.Key{Namespace: "default", Name: "other"},
			wantLine: `      - {name: app, image: "shop/checkout:v1"}`},
		{name: "single quoted", src: "kind: Rollout\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n      containers:\n      - image: 'shop/checkout:v2'\n",
			key: api.Key{Namespace: "default", Name: "a"}, wantLine: "      - image: 'shop/checkout:v1'"},
		{name: "CRLF line ends", src: "kind: Rollout\r\nmetadata: {name: a}\r\nspec:\r\n  template:\r\n    spec:\r\n      containers:\r\n      - image: shop/checkout:v2 # c\r\n",
			key: api.Key{Namespace: "default", Name: "a"}, wantLine: "      - image: shop/checkout:v1 # c\r"},
		{name: "no such rollout", src: multiDoc, key: api.Key{Namespace: "default", Name: "nope"}, wantErr: ErrNoRollout},
		{name: "image changed meanwhile", src: strings.Replace(multiDoc, `&img "shop/checkout:v2"`, `&img "shop/checkout:v3"`, 1),
			key: api.Key{Namespace: "default", Name: "checkout"}, wantErr: ErrImageChanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := SetImage([]byte(tt.src), tt.key, "shop/checkout:v2", "shop/checkout:v1")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertOneLineDiff(t, tt.src, string(out), tt.wantLine)
			if img, _, err := ImageOf(out, tt.key); err != nil || img != "shop/checkout:v1" {
				t.Errorf("image after the edit = %q, %v", img, err)
			}
		})
	}
}

func TestSetImageRefusesAlias(t *testing.T) {
	src := "kind: Rollout\nmetadata: {name: a, labels: {img: &img shop/checkout:v2}}\nspec: {template: {spec: {containers: [{image: *img}]}}}\n"
	if _, err := SetImage([]byte(src), api.Key{Namespace: "default", Name: "a"}, "shop/checkout:v2", "shop/checkout:v1"); err == nil || !strings.Contains(err.Error(), "alias") {
		t.Fatalf("err = %v, want a refusal naming the alias", err)
	}
}

// assertOneLineDiff checks that after differs from before in exactly one
// line, and that this line is want.
func assertOneLineDiff(t *testing.T, before, after, want string) {
	t.Helper()
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	if len(a) != len(b) {
		t.Fatalf("line count %d → %d:\n%s", len(b), len(a), after)
	}
	changed := 0
	for i := range b {
		if a[i] == b[i] {
			continue
		}
		changed++
		if a[i] != want {
			t.Errorf("line %d: %q, want %q", i+1, a[i], want)
		}
	}
	if changed != 1 {
		t.Errorf("%d lines changed, want 1:\n%s", changed, after)
	}
}
