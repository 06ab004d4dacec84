package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWritebackConfigKeys: the git writeback settings go in --config under
// their flag names, like every other flag, and default to writing nothing.
func TestWritebackConfigKeys(t *testing.T) {
	cmd := newRunCmd()
	if got := cmd.Flags().Lookup("git-writeback").DefValue; got != "none" {
		t.Errorf("--git-writeback defaults to %q, want none", got)
	}
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	config := `git-writeback: status,revert
git-writeback-branch: sluice/revert
git-forge: gitlab
git-forge-url: https://gitlab.example
git-forge-token-file: /run/secrets/forge-token
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := applyConfigFile(cmd.Flags(), path); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"git-writeback":        "status,revert",
		"git-writeback-branch": "sluice/revert",
		"git-forge":            "gitlab",
		"git-forge-url":        "https://gitlab.example",
		"git-forge-token-file": "/run/secrets/forge-token",
	} {
		t.Run(flag, func(t *testing.T) {
			if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
				t.Errorf("--%s = %q from the config, want %q", flag, got, want)
			}
		})
	}
}
