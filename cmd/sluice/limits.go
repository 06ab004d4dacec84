package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/api"
)

// addStrategyLimitFlags registers the strategy file limits, shared by
// `sluice run` and `sluice validate` so a file validated locally is read
// under the same limits as by the daemon.
func addStrategyLimitFlags(f *pflag.FlagSet, l *api.Limits) {
	f.Int64Var(&l.MaxFileBytes, "strategy-max-file-bytes", api.DefaultMaxFileBytes, "largest strategy file read, in bytes; a larger file is reported and not read (-1: no limit)")
	f.Int64Var(&l.MaxRevisionBytes, "strategy-max-revision-bytes", api.DefaultMaxRevisionBytes, "most bytes of strategy files in one commit; past it the commit is refused (-1: no limit)")
	f.IntVar(&l.MaxFiles, "strategy-max-files", api.DefaultMaxFiles, "most strategy files in one commit; past it the commit is refused (-1: no limit)")
}

// refused is an error for a tree of strategy files refused as a whole (over
// a limit): a diff against it would show every rollout as deleted.
func refused(set *api.Set) error {
	if !set.Refused {
		return nil
	}
	return errors.New(set.Diagnostics.Errors()[0].String())
}
