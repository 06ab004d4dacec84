package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/diffengine"
	"github.com/sluice-dev/sluice/diffengine/gitfs"
	"github.com/spf13/cobra"
	sigsyaml "sigs.k8s.io/yaml"
)

type diffOptions struct {
	repo   string
	path   string
	output string
	color  string
}

func newDiffCmd() *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff OLD NEW | diff --repo PATH_OR_URL REV1 REV2",
		Short: "Semantic diff of two versions of strategy files",
		Long: `Compare two versions of strategy files: two files, two directories, or two
revisions of a git repository (--repo, with --path for the strategy directory).
Changes are shown by Argo field path with their class (NewVersion, StrategyEdit,
EndpointsOnly, Cosmetic, Added, Removed) and why a change is risky. Key order,
comments, formatting and defaults written out explicitly are not changes.

Exit status: 0 no changes, 1 changes, 2 trouble (including invalid NEW files).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd, o, args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.repo, "repo", "", "git repository (path or URL); OLD and NEW are then revisions")
	f.StringVar(&o.path, "path", ".", "with --repo: directory of the strategy files inside the repository")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	f.StringVar(&o.color, "color", "auto", "colour the table output: auto (on a terminal), always or never")
	return cmd
}

// diffSide is one loaded version and how to name its files in messages.
type diffSide struct {
	label string
	set   *api.Set
	// prefix is joined before diagnostic file names (a directory loaded
	// with names relative to itself).
	prefix string
}

func runDiff(cmd *cobra.Command, o diffOptions, oldArg, newArg string) error {
	switch o.output {
	case "table", "text", "json", "yaml":
	default:
		return fmt.Errorf("unknown output format %q (use table, json or yaml)", o.output)
	}
	var old, new diffSide
	var err error
	if o.repo != "" {
		old, new, err = loadRevisions(cmd, o, oldArg, newArg)
	} else {
		old, new, err = loadPaths(oldArg, newArg)
	}
	if err != nil {
		return err
	}
	report := diffengine.NewReport(old.set, new.set)

	w := cmd.OutOrStdout()
	switch o.output {
	case "json", "yaml":
		data, err := report.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode diff: %w", err)
		}
		if o.output == "yaml" {
			if data, err = sigsyaml.JSONToYAML(data); err != nil {
				return fmt.Errorf("encode diff: %w", err)
			}
		} else {
			var buf bytes.Buffer
			if err := json.Indent(&buf, data, "", "  "); err != nil {
				return fmt.Errorf("encode diff: %w", err)
			}
			data = append(buf.Bytes(), '\n')
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	default:
		if err := report.WriteText(w, useColor(o.color, w)); err != nil {
			return err
		}
	}

	stderr := cmd.ErrOrStderr()
	for _, side := range []diffSide{old, new} {
		for _, d := range side.set.Diagnostics.Errors() {
			if side.prefix != "" {
				d.File = filepath.Join(side.prefix, d.File)
			}
			fmt.Fprintf(stderr, "%s: %s\n", side.label, d)
		}
	}
	switch {
	case new.set.Diagnostics.HasErrors():
		return exitError{code: 2}
	case report.Changed():
		return exitError{code: 1}
	}
	return nil
}

// loadPaths loads two files or two directories. Both sides are named
// relative to their own root (a file by its base name) so that the same
// file on both sides has the same name: DiffSets relies on that to tell a
// file that no longer parses from a deleted one.
func loadPaths(oldPath, newPath string) (old, new diffSide, err error) {
	oi, err := os.Stat(oldPath)
	if err != nil {
		return old, new, fmt.Errorf("diff: %w", err)
	}
	ni, err := os.Stat(newPath)
	if err != nil {
		return old, new, fmt.Errorf("diff: %w", err)
	}
	if oi.IsDir() != ni.IsDir() {
		return old, new, fmt.Errorf("diff: %s and %s must both be files or both directories", oldPath, newPath)
	}
	load := func(label, p string, info os.FileInfo) (diffSide, error) {
		if info.IsDir() {
			set, err := api.LoadFS(os.DirFS(p), ".")
			if err == nil {
				err = refused(set)
			}
			return diffSide{label: label, set: set, prefix: p}, err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return diffSide{}, fmt.Errorf("diff: %w", err)
		}
		// One logical file name for both sides; messages show the real path.
		set := api.Load([]api.Source{{Name: filepath.Base(newPath), Data: data}})
		for i := range set.Diagnostics {
			set.Diagnostics[i].File = p
		}
		return diffSide{label: label, set: set}, nil
	}
	if old, err = load("old", oldPath, oi); err != nil {
		return old, new, err
	}
	new, err = load("new", newPath, ni)
	return old, new, err
}

// loadRevisions reads two revisions of a repository with go-git.
func loadRevisions(cmd *cobra.Command, o diffOptions, oldRev, newRev string) (old, new diffSide, err error) {
	repo, err := gitfs.Open(cmd.Context(), gitfs.Options{Source: o.repo})
	if err != nil {
		return old, new, err
	}
	load := func(rev string) (diffSide, error) {
		fsys, hash, err := repo.FS(rev)
		if err != nil {
			return diffSide{}, err
		}
		set, err := api.LoadFS(fsys, o.path)
		if err == nil {
			err = refused(set)
		}
		if err != nil {
			return diffSide{}, fmt.Errorf("load %s at %s: %w", o.path, rev, err)
		}
		return diffSide{label: rev + " (" + hash.String()[:12] + ")", set: set}, nil
	}
	if old, err = load(oldRev); err != nil {
		return old, new, err
	}
	new, err = load(newRev)
	return old, new, err
}

// useColor decides whether the table output gets ANSI colours: always,
// never, or (auto) when w is a terminal and NO_COLOR is unset.
func useColor(mode string, w io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
