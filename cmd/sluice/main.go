// Command sluice is the one binary: the daemon (`sluice run`), the demo,
// offline tools (validate, diff, schedule) and the client commands that talk
// to a running daemon.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command without printing
// anything more (the command has already said what went wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "GitOps canary rollouts with a built-in xDS traffic gateway",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCmd(),
		newValidateCmd(),
		newDiffCmd(),
		newRunCmd(),
		newDemoCmd(),
		newScheduleCmd(),
		newStateCmd(),
		newGetCmd(), newPromoteCmd(), newAbortCmd(), newRetryCmd(), newApproveCmd(), newPauseCmd(), newResumeCmd(),
	)
	return root
}

func main() {
	err := newRootCmd().Execute()
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(2)
	}
}
