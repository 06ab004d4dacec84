package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi/view"
)

// The operator commands: one cobra command per verb, all the same shape.
func newPromoteCmd() *cobra.Command {
	return newVerbCmd("promote", "Move a paused canary to its next step (--full: promote to 100 % now)")
}
func newAbortCmd() *cobra.Command {
	return newVerbCmd("abort", "Send all traffic back to stable and hold the rollout Degraded")
}
func newRetryCmd() *cobra.Command {
	return newVerbCmd("retry", "Start an aborted canary again from its first step")
}
func newApproveCmd() *cobra.Command {
	return newVerbCmd("approve", "Approve a risky strategy change waiting in phase Paused")
}
func newPauseCmd() *cobra.Command {
	return newVerbCmd("pause", "Hold the canary at its current step")
}
func newResumeCmd() *cobra.Command {
	return newVerbCmd("resume", "Continue a canary held by pause")
}

type verbOptions struct {
	clientOptions
	full bool
}

func newVerbCmd(verb, short string) *cobra.Command {
	var o verbOptions
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Long: short + `.
NAME is namespace/name, or name in namespace default. Prints the rollout's
new status; with --token-file the token is sent as a bearer token.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			st, err := c.Command(cmd.Context(), api.ParseKey(args[0]), verb, o.full)
			if err != nil {
				return apiFailure(cmd, err)
			}
			if o.output == "json" || o.output == "yaml" {
				return printStructured(cmd.OutOrStdout(), o.output, st)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), view.StatusLine(st))
			return err
		},
	}
	o.addFlags(cmd, true)
	if verb == "promote" {
		cmd.Flags().BoolVar(&o.full, "full", false, "skip the remaining steps and promote the canary to 100 %")
	}
	return cmd
}
