package daemon

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/writeback"
	"github.com/sluice-dev/sluice/gitwatch"
)

// writebackModes is what --git-writeback asks for.
type writebackModes struct{ status, revert bool }

// parseWriteback reads --git-writeback: none, status, revert or
// status,revert (in any order).
func parseWriteback(s string) (writebackModes, error) {
	var m writebackModes
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "", "none":
		case "status":
			m.status = true
		case "revert":
			m.revert = true
		default:
			return m, fmt.Errorf("--git-writeback %q: want none, status, revert or status,revert", s)
		}
	}
	return m, nil
}

// writebackSink builds the git writeback sink, or nil when
// --git-writeback is none. The runner and the alert tap are looked up
// when an alert is delivered: they are built after the dispatcher.
func (d *Daemon) writebackSink() (*writeback.Sink, error) {
	o := d.opts
	modes, err := parseWriteback(o.GitWriteback)
	if err != nil {
		return nil, err
	}
	if modes.status {
		return nil, fmt.Errorf("--git-writeback status: commit statuses are not available in this build")
	}
	if !modes.revert {
		return nil, nil
	}
	remote, err := gitwatch.NewRemote(o.Repo, o.GitAuth)
	if err != nil {
		return nil, fmt.Errorf("git writeback: %w", err)
	}
	rev, err := writeback.NewReverter(writeback.ReverterOptions{
		Remote: remote,
		Branch: func() string {
			if o.Branch != "" {
				return strings.TrimPrefix(o.Branch, "refs/heads/")
			}
			return d.watcher.Status().Branch
		},
		Path:       o.Path,
		PushBranch: o.GitWritebackBranch,
		CacheDir:   filepath.Join(o.StateDir, "writeback"),
		Timeout:    o.GitTimeout,
		Logger:     d.log,
	})
	if err != nil {
		return nil, err
	}
	return writeback.NewSink(writeback.SinkOptions{
		Reverter: rev,
		Stable: func(k api.Key) (string, bool) {
			st, ok := d.runner.Status(k)
			return st.StableVersion, ok
		},
		Notify: func(a alert.Alert) error { return d.alerts.Enqueue(a) },
		Logger: d.log,
	})
}

// withWriteback adds what was written back to git to a status.
func writebackRecord(s *writeback.Sink, key api.Key) (writeback.Record, bool) {
	if s == nil {
		return writeback.Record{}, false
	}
	return s.Record(key)
}
