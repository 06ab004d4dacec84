package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
)

// envCrashDir makes the test binary act as the writer process of
// TestKill9KeepsAcknowledgedWrites.
const envCrashDir = "SLUICE_STORE_CRASH_DIR"

var crashKey = api.Key{Namespace: "default", Name: "checkout"}

// TestCrashWriter is not a test on its own: run by
// TestKill9KeepsAcknowledgedWrites in a child process, it saves states and
// alerts as fast as it can and prints "ack N" after each write returned.
func TestCrashWriter(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("helper process for TestKill9KeepsAcknowledgedWrites")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	for i := 1; ; i++ {
		if err := s.SaveRollout(crashKey, []byte(strconv.Itoa(i))); err != nil {
			fmt.Println("save:", err)
			os.Exit(3)
		}
		if err := s.EnqueueAlert(alert.Alert{ID: fmt.Sprintf("a%d", i)}, []string{"hook"}); err != nil {
			fmt.Println("enqueue:", err)
			os.Exit(3)
		}
		fmt.Printf("ack %d\n", i)
	}
}

// TestKill9KeepsAcknowledgedWrites kills a writing process with SIGKILL at
// several moments and checks that every write it had reported done is in
// the file, that the file opens cleanly, and that nothing appears twice.
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	for _, after := range []int{1, 17, 60} {
		t.Run(fmt.Sprintf("after %d acks", after), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriter$", "-test.count=1")
			cmd.Env = append(os.Environ(), envCrashDir+"="+dir)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := 0
			sc := bufio.NewScanner(out)
			for acked < after && sc.Scan() {
				n, ok := strings.CutPrefix(sc.Text(), "ack ")
				if !ok {
					t.Fatalf("writer said %q", sc.Text())
				}
				acked, _ = strconv.Atoi(n)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			// Acks already in the pipe were also written before the kill.
			for sc.Scan() {
				if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
					acked, _ = strconv.Atoi(n)
				}
			}
			_ = cmd.Wait()
			if acked < after {
				t.Fatalf("writer stopped after %d acks", acked)
			}

			s := open(t, dir)
			state, ok, err := s.LoadRollout(crashKey)
			must(t, err)
			got, _ := strconv.Atoi(string(state))
			// The write after the last ack may or may not have landed.
			if !ok || got < acked || got > acked+1 {
				t.Errorf("state after kill -9 = %q, want %d (or %d)", state, acked, acked+1)
			}
			pending, err := s.PendingAlerts("hook")
			must(t, err)
			if len(pending) < acked || len(pending) > acked+1 {
				t.Fatalf("%d pending alerts after kill -9, want %d (or %d)", len(pending), acked, acked+1)
			}
			for i, a := range pending {
				if a.ID != fmt.Sprintf("a%d", i+1) {
					t.Fatalf("pending[%d] = %s, want a%d: lost, reordered or duplicated", i, a.ID, i+1)
				}
			}
		})
	}
}
