package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// envStorePanicChild makes the test binary the child process of
// TestStorePanicIsNotContained.
const envStorePanicChild = "SLUICE_RUNNER_STORE_PANIC_CHILD"

// panickingStore panics on every save, like bbolt on a damaged page.
type panickingStore struct{ Store }

func (panickingStore) SaveRollout(api.Key, []byte) error { panic("disk exploded") }

// TestStorePanicIsNotContained: the runner contains a panic to the event
// that raised it, but not one from the store: after it the store may never
// write again (bbolt can keep its write lock), so the process must crash
// instead of running on. The event runs in a child process, which must die
// with the store's panic instead of answering.
func TestStorePanicIsNotContained(t *testing.T) {
	if os.Getenv(envStorePanicChild) != "" {
		e := newEnv(t, envOptions{storeWrap: func(s Store) Store { return panickingStore{s} }})
		k := api.Key{Namespace: "default", Name: "web"}
		_, err := e.runner.Do(context.Background(), k, rollout.Change{Commit: "1", Rollout: spec(k, "v1")})
		fmt.Println("survived the store panic:", err)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStorePanicIsNotContained$", "-test.count=1")
	cmd.Env = append(os.Environ(), envStorePanicChild+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "survived") {
		t.Fatalf("the process survived a store panic: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "state store panicked: disk exploded") {
		t.Fatalf("the crash does not name the store:\n%s", out)
	}
}
