package daemon

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

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

// writebackSinks builds the git writeback sinks (none when --git-writeback
// is none) and the records they keep for the rollouts' status. The runner,
// the watcher, the alert tap and the HTTP listener are looked up when an
// alert is delivered: they are built or bound after the dispatcher.
func (d *Daemon) writebackSinks() ([]alert.Sink, *writeback.Records, error) {
	o := d.opts
	modes, err := parseWriteback(o.GitWriteback)
	if err != nil {
		return nil, nil, err
	}
	if !modes.status && !modes.revert {
		return nil, nil, nil
	}
	remote, err := gitwatch.NewRemote(o.Repo, o.GitAuth)
	if err != nil {
		return nil, nil, fmt.Errorf("git writeback: %w", err)
	}
	var forge writeback.Forge
	if o.GitForge != "" {
		if forge, err = writeback.NewForge(writeback.ForgeOptions{Kind: o.GitForge, URL: o.GitForgeURL,
			TokenFile: o.GitForgeTokenFile, Repo: forgeRepoPath(o.Repo)}); err != nil {
			return nil, nil, fmt.Errorf("--git-forge: %w", err)
		}
	}
	if modes.status && forge == nil {
		return nil, nil, fmt.Errorf("--git-writeback status needs --git-forge and --git-forge-token-file")
	}
	records := writeback.NewRecords()
	var sinks []alert.Sink
	if modes.revert {
		rev, err := writeback.NewReverter(writeback.ReverterOptions{
			Remote: remote, Branch: d.followedBranch, Path: o.Path, PushBranch: o.GitWritebackBranch,
			CacheDir: filepath.Join(o.StateDir, "writeback"), Timeout: o.GitTimeout, Logger: d.log,
		})
		if err != nil {
			return nil, nil, err
		}
		sink, err := writeback.NewSink(writeback.SinkOptions{
			Reverter: rev, Forge: forge, Records: records, Logger: d.log,
			Stable: func(k api.Key) (string, bool) {
				st, ok := d.runner.Status(k)
				return st.StableVersion, ok
			},
			Notify: func(a alert.Alert) error { return d.alerts.Enqueue(a) },
		})
		if err != nil {
			return nil, nil, err
		}
		sinks = append(sinks, sink)
	}
	if modes.status {
		sink, err := writeback.NewStatusSink(writeback.StatusSinkOptions{Forge: forge, Records: records, Logger: d.log,
			TargetURL: d.rolloutURL})
		if err != nil {
			return nil, nil, err
		}
		sinks = append(sinks, sink)
	}
	return sinks, records, nil
}

// followedBranch is --branch, or the remote's HEAD branch once the watcher
// has resolved it.
func (d *Daemon) followedBranch() string {
	if d.opts.Branch != "" {
		return strings.TrimPrefix(d.opts.Branch, "refs/heads/")
	}
	return d.watcher.Status().Branch
}

// rolloutURL is the rollout's status in the HTTP API, the target of its
// commit statuses.
func (d *Daemon) rolloutURL(k api.Key) string {
	if d.httpLis == nil {
		return ""
	}
	return "http://" + d.httpLis.Addr().String() + "/api/v1/rollouts/" + k.Namespace + "/" + k.Name
}

// forgeRepoPath is the repository's path on its forge, from its URL:
// "org/repo" from https://github.com/org/repo.git or git@host:org/repo.
func forgeRepoPath(repo string) string {
	ep, err := transport.NewEndpoint(repo)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.Trim(ep.Path, "/"), ".git")
}
