package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// sluiceBin is the binary under test, built once by TestMain.
var sluiceBin string

// kubeNodes is the size of the Kubernetes control plane the Kubernetes-mode
// tests share: kwok nodes over three zones.
const kubeNodes = 6

func TestMain(m *testing.M) {
	// Kubernetes-mode tests serve backends on pod IPs, which are local
	// only inside kubetest's network namespace; every other test runs on
	// loopback, which the namespace has too. The control plane starts on
	// the first test that asks for it.
	kubetest.EnterNetns()
	kubetest.Lazy(kubeNodes)
	code := run(m)
	kubetest.StopLazy()
	os.Exit(code)
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	sluiceBin = filepath.Join(dir, "sluice")
	// The race detector is on for `go test -race` of this package, but the
	// binary is the user's view: build it as users do.
	build := exec.Command("go", "build", "-o", sluiceBin, "./cmd/sluice")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build sluice:", err)
		return 1
	}
	return m.Run()
}

// requireGit fails the test when git is missing: CI installs it
// (hack/test-deps.sh), so skipping would hide a broken setup.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed; run hack/test-deps.sh")
	}
}
