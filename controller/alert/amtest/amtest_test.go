package amtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records a Fatal instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg    string
	skip   bool
	failed bool
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg, f.failed = fmt.Sprint(args...), true
	runtime.Goexit()
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg, f.failed = fmt.Sprintf(format, args...), true
	runtime.Goexit()
}
func (f *fatalTB) Skip(...any) { f.skip = true; runtime.Goexit() }

func TestMissingBinaryFailsClearly(t *testing.T) {
	t.Setenv(EnvBinary, "/nonexistent/alertmanager")
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); Start(tb) }()
	<-done
	if tb.skip || !tb.failed {
		t.Fatalf("Start with no binary: skipped=%v failed=%v, want a failure", tb.skip, tb.failed)
	}
	for _, want := range []string{"prometheus-alertmanager", "hack/test-deps.sh"} {
		if !strings.Contains(tb.msg, want) {
			t.Errorf("failure %q does not mention %q", tb.msg, want)
		}
	}
}

func TestStartServesAPI(t *testing.T) {
	am := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alerts, err := am.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 0 {
		t.Errorf("fresh alertmanager has %d alerts", len(alerts))
	}
}
