package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/cmd/sluice/internal/demo"
)

func newDemoCmd() *cobra.Command {
	o := demo.Options{Out: os.Stdout}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show a real canary on this machine: git push, traffic shift, analysis, promotion or rollback",
		Long: `Run everything on this machine in one command: a throw-away git repository with a
canary strategy, the sluice daemon, two demo gRPC backends (v1 and v2), a load generator
of real gRPC xDS clients, and a push of v2. The rollout is shown live — declared weights
next to the split the clients observe, analysis values and verdicts, events and alerts —
and summarized at the end.

--fail makes v2 fail 20% of its requests: analysis fails, traffic returns to v1 and an
alert arrives at a local webhook sink. --keep leaves everything running afterwards so you
can push your own changes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.TTY = demo.IsTerminal(os.Stdout)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err := demo.Run(ctx, o)
			if errors.Is(err, demo.ErrUnexpectedOutcome) {
				fmt.Fprintln(os.Stderr, "sluice demo:", err)
				return exitError{code: 1}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Fail, "fail", false, "make v2 fail 20% of requests, so analysis fails and the rollout rolls back")
	f.BoolVar(&o.Keep, "keep", false, "keep the daemon, backends and load running after the summary")
	f.Float64Var(&o.Speed, "speed", 1, "divide the strategy's durations by this factor (2 runs twice as fast)")
	f.Float64Var(&o.Rate, "rate", 200, "requests per second sent by the load generator")
	f.StringVar(&o.Dir, "dir", "", "directory for the repository, state and log (default: a temporary one)")
	return cmd
}
