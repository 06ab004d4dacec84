package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/controller/store"
)

type stateOptions struct {
	stateDir string
	timeout  time.Duration
	out      string
}

func newStateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Check or back up the daemon's state file (sluice.db) offline",
		Long: `Check or back up the state file in --state-dir while no daemon runs on it
(the daemon holds the file's lock; these commands say so when it does).`,
	}
	cmd.AddCommand(newStateCheckCmd(), newStateBackupCmd())
	return cmd
}

func (o *stateOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.stateDir, "state-dir", ".sluice", "the daemon's state directory")
	cmd.Flags().DurationVar(&o.timeout, "timeout", store.DefaultCheckTimeout, "bound of the consistency check")
}

func newStateCheckCmd() *cobra.Command {
	var o stateOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Run the consistency check the daemon runs at start; exit 1 if the file is damaged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := filepath.Join(o.stateDir, store.FileName)
			err := store.Check(o.stateDir, o.timeout)
			if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrCheckTimeout) {
				fmt.Fprintln(cmd.ErrOrStderr(), "damaged:", err)
				return exitError{code: 1}
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "ok: %s is consistent\n", path)
			return err
		},
	}
	o.addFlags(cmd)
	return cmd
}

func newStateBackupCmd() *cobra.Command {
	var o stateOptions
	cmd := &cobra.Command{
		Use:   "backup -o FILE",
		Short: "Write a checked, consistent copy of the state file to FILE",
		Long: `Check the state file, then write a consistent copy of it to FILE (atomically:
FILE is either untouched or complete). To restore, stop the daemon and copy FILE
to sluice.db in the state directory. A damaged file is not copied (exit 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.out == "" {
				return errors.New("-o FILE is required")
			}
			path := filepath.Join(o.stateDir, store.FileName)
			n, err := store.Backup(o.stateDir, o.out, o.timeout)
			if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrCheckTimeout) {
				fmt.Fprintln(cmd.ErrOrStderr(), "damaged, not backed up:", err)
				return exitError{code: 1}
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s (%d bytes)\n", path, o.out, n)
			return err
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "file to write the backup to (required)")
	return cmd
}
