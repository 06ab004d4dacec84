package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/sluice-dev/sluice/api"
	"github.com/spf13/cobra"
)

type validateOptions struct {
	output string
	limits api.Limits
	// kubernetes checks the files as `sluice run --kubernetes` loads them.
	kubernetes bool
}

func newValidateCmd() *cobra.Command {
	var o validateOptions
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Parse and validate strategy files offline",
		Long: `Parse and validate Argo Rollouts strategy files: Rollout, AnalysisTemplate and
ClusterAnalysisTemplate documents in *.yaml/*.yml files (directories recursively).
Templates are resolved across everything given. Errors print as
file:line: field.path: reason and make the command exit 1; warnings alone exit 0.
Files are read under the daemon's limits (--strategy-max-*; YAML alias cycles
and excessive alias expansion are always refused).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd.OutOrStdout(), o, args)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&o.kubernetes, "kubernetes", false, "check the files as sluice run --kubernetes loads them (experiment steps, job metrics, the workload fields, the cluster's routers; no plugin endpoints)")
	addStrategyLimitFlags(cmd.Flags(), &o.limits)
	return cmd
}

func runValidate(w io.Writer, o validateOptions, paths []string) error {
	l := api.NewLoader(o.limits)
	if o.kubernetes {
		l.ForKubernetes()
	}
	set, err := l.LoadPaths(paths...)
	if err != nil {
		return err
	}
	// A host two rollouts claim is an error here: the daemon keeps the
	// rollout that held it first and refuses the other.
	diags := append(slices.Clone(set.Diagnostics), set.HostDiagnostics()...)
	switch o.output {
	case "json":
		if diags == nil {
			diags = api.Diagnostics{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(diags); err != nil {
			return err
		}
	case "text", "table", "":
		for _, d := range diags {
			fmt.Fprintln(w, d)
		}
		if !diags.HasErrors() {
			fmt.Fprintf(w, "ok: %d rollouts, %d analysis templates\n", len(set.Rollouts), len(set.Templates))
		}
	default:
		return fmt.Errorf("unknown output format %q (use text or json)", o.output)
	}
	if diags.HasErrors() {
		return exitError{code: 1}
	}
	return nil
}
