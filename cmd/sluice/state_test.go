package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/store"
)

var stateKey = api.Key{Namespace: "default", Name: "checkout"}

// stateDir makes a state directory holding one rollout state.
func stateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRollout(stateKey, []byte(`{"step":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// zeroMeta damages the file beyond use: both meta pages zeroed.
func zeroMeta(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, store.FileName), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 2*store.PageSize), 0); err != nil {
		t.Fatal(err)
	}
}

func TestStateCheck(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		code    int
		want    string // in stdout or stderr
	}{
		{name: "good file", prepare: func(*testing.T, string) {}, code: 0, want: "is consistent"},
		{name: "damaged file", prepare: zeroMeta, code: 1, want: "sluice state backup"},
		{name: "daemon running", prepare: func(t *testing.T, dir string) {
			s, err := store.Open(dir, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
		}, code: 2, want: "stop the sluice daemon"},
		{name: "no state", prepare: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, store.FileName)); err != nil {
				t.Fatal(err)
			}
		}, code: 2, want: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := stateDir(t)
			tt.prepare(t, dir)
			out, errOut, code := runSluice(t, "state", "check", "--state-dir", dir)
			if code != tt.code || !strings.Contains(out+errOut, tt.want) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tt.code, tt.want, out, errOut)
			}
		})
	}
}

// TestStateBackupRestore: a backup restored into a new state directory
// holds the same state; a damaged file is not backed up.
func TestStateBackupRestore(t *testing.T) {
	dir := stateDir(t)
	backup := filepath.Join(t.TempDir(), "sluice-backup.db")
	out, errOut, code := runSluice(t, "state", "backup", "--state-dir", dir, "-o", backup)
	if code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}
	restored := t.TempDir()
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, store.FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(restored, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.LoadRollout(stateKey)
	if err != nil || !ok || string(got) != `{"step":3}` {
		t.Fatalf("restored state %q ok=%v err=%v", got, ok, err)
	}

	zeroMeta(t, dir)
	bad := filepath.Join(t.TempDir(), "bad.db")
	if _, errOut, code := runSluice(t, "state", "backup", "--state-dir", dir, "-o", bad); code != 1 || !strings.Contains(errOut, "not backed up") {
		t.Fatalf("backup of a damaged file: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a damaged file was copied: %v", err)
	}
}
