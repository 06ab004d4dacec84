package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
	"github.com/sluice-dev/sluice/controller/httpapi/view"
)

func newGetCmd() *cobra.Command {
	get := &cobra.Command{
		Use:   "get",
		Short: "Show rollout status from the daemon",
		Args:  cobra.NoArgs,
	}
	get.AddCommand(newGetRolloutsCmd(), newGetRolloutCmd())
	return get
}

func newGetRolloutsCmd() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:     "rollouts",
		Aliases: []string{"ro"},
		Short:   "List every rollout: phase, step, weights, versions",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			items, err := c.List(cmd.Context())
			if err != nil {
				return apiFailure(cmd, err)
			}
			if o.output == "json" || o.output == "yaml" {
				return printStructured(cmd.OutOrStdout(), o.output, httpapi.List{Items: items})
			}
			return view.Table(cmd.OutOrStdout(), items)
		},
	}
	o.addFlags(cmd, true)
	return cmd
}

type getRolloutOptions struct {
	clientOptions
	watch bool
}

func newGetRolloutCmd() *cobra.Command {
	var o getRolloutOptions
	cmd := &cobra.Command{
		Use:   "rollout NAME",
		Short: "Show one rollout (NAME is namespace/name or name in namespace default)",
		Long: `Show one rollout: phase, step i/n and its message, weights as a bar, header
routes, analysis runs with their latest values, and the last events.
With --watch the view follows the daemon's event stream: redrawn in place on
a terminal, one appended line per event otherwise. A multi-cluster rollout's
own name lists its parts (one per cluster, NAME@CLUSTER).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			key := api.ParseKey(args[0])
			if o.watch {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				out := cmd.OutOrStdout()
				return apiFailure(cmd, watchRollout(ctx, c, key, out, o.output, isTerminal(out)))
			}
			st, err := c.Get(cmd.Context(), key)
			if errors.Is(err, httpapi.ErrNotFound) {
				if shown, perr := o.printParts(cmd, c, key); shown || perr != nil {
					return perr
				}
			}
			if err != nil {
				return apiFailure(cmd, err)
			}
			if o.output == "json" || o.output == "yaml" {
				return printStructured(cmd.OutOrStdout(), o.output, st)
			}
			events, err := c.Recent(cmd.Context(), key)
			if err != nil {
				return apiFailure(cmd, err)
			}
			return view.Detail(cmd.OutOrStdout(), st, events)
		},
	}
	o.addFlags(cmd, true)
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "follow the rollout until interrupted")
	return cmd
}

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// watchRollout renders every update: the whole view in place on a
// terminal; otherwise a status line first and one line per event, or one
// JSON/YAML document per update with -o json|yaml.
func watchRollout(ctx context.Context, c *client.Client, key api.Key, w io.Writer, output string, tty bool) error {
	var last *httpapi.Event
	return c.Watch(ctx, key, func(u client.Update) error {
		if u.Latest != nil {
			repeat := last != nil && view.Repeats(*last, *u.Latest)
			last = u.Latest
			if repeat {
				return nil
			}
		}
		switch {
		case output == "json" || output == "yaml":
			if output == "yaml" {
				fmt.Fprintln(w, "---")
			}
			return printStructured(w, output, u.Status)
		case tty:
			fmt.Fprint(w, clearScreen)
			return view.Detail(w, u.Status, u.Events)
		case u.Latest == nil:
			_, err := fmt.Fprintln(w, view.StatusLine(u.Status))
			return err
		default:
			_, err := fmt.Fprintln(w, view.EventLine(*u.Latest))
			return err
		}
	})
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// printParts shows a multi-cluster rollout asked for by its own name: it
// has no status of its own, only its parts ("name@cluster"), listed as
// `get rollouts` lists them. It reports whether it found any.
func (o getRolloutOptions) printParts(cmd *cobra.Command, c *client.Client, key api.Key) (bool, error) {
	items, err := c.List(cmd.Context())
	if err != nil {
		return false, apiFailure(cmd, err)
	}
	parts := slices.DeleteFunc(items, func(s httpapi.RolloutStatus) bool {
		k := api.Key{Namespace: s.Namespace, Name: s.Name}
		return k.Cluster() == "" || k.Parent() != key
	})
	if len(parts) == 0 {
		return false, nil
	}
	if o.output == "json" || o.output == "yaml" {
		return true, printStructured(cmd.OutOrStdout(), o.output, parts)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s runs in %d clusters, one part each (sluice get rollout %s@CLUSTER for one):\n", key, len(parts), key)
	return true, view.Table(cmd.OutOrStdout(), parts)
}
