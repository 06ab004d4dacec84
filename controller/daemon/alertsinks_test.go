package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
)

// TestAlertSlackFile: the Slack URL read from --alert-slack-file is the
// one alerts go to, and the sink shows only its host.
func TestAlertSlackFile(t *testing.T) {
	got := make(chan string, 1)
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Text string `json:"text"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Errorf("slack got %q: %v", b, err)
		}
		got <- r.URL.Path + " " + msg.Text
	}))
	t.Cleanup(slack.Close)
	file := filepath.Join(t.TempDir(), "slack-url")
	if err := os.WriteFile(file, []byte(slack.URL+"/services/T0/B0/SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sinks, err := alertSinks(Options{AlertSlackFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if len(sinks) != 1 {
		t.Fatalf("%d sinks, want 1", len(sinks))
	}
	if s := sinks[0].(*alert.HTTPSink).String(); s != "slack:"+slack.URL+"/…" {
		t.Errorf("sink shows as %q", s)
	}
	a := alert.Alert{ID: "x", Event: alert.EventRolloutAborted, Severity: alert.SeverityError, Rollout: "default/checkout", Reason: "analysis failed", Time: time.Now()}
	if err := sinks[0].Send(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	if msg := <-got; !strings.HasPrefix(msg, "/services/T0/B0/SECRET ") || !strings.Contains(msg, "default/checkout") {
		t.Fatalf("slack got %q", msg)
	}
}

func TestAlertURLFileErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	secret := filepath.Join(dir, "secret")
	for path, content := range map[string]string{empty: " \n", secret: "ftp://user:SECRET@host/x"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"missing slack file", Options{AlertSlackFile: filepath.Join(dir, "nope")}, "--alert-slack-file: open"},
		{"empty webhook file", Options{AlertWebhookFiles: []string{empty}}, "--alert-webhook-file " + empty + ": the file is empty"},
		{"bad alertmanager url", Options{AlertmanagerURLFile: secret}, "want an absolute http(s) URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alertSinks(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("alertSinks = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("error %q shows the file's secret", err)
			}
		})
	}
}
