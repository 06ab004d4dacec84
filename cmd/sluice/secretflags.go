package main

import (
	"log/slog"

	"github.com/spf13/pflag"
)

// secretFlags are the flags of `sluice run` whose values are credentials
// (a Slack webhook's path, user:password@ in a webhook URL), each with the
// flag that reads the same value from a file. On the command line a
// secret is visible to every user of the host (ps, /proc/PID/cmdline) and
// was served by pprof's /debug/pprof/cmdline; in a file or the --config
// file it is not.
var secretFlags = []struct{ inline, file string }{
	{"alert-webhook", "alert-webhook-file"},
	{"alert-slack", "alert-slack-file"},
	{"alertmanager-url", "alertmanager-url-file"},
}

// secretsOnCommandLine names the secret flags given on the command line;
// call it before a config file sets flags.
func secretsOnCommandLine(fs *pflag.FlagSet) []string {
	var set []string
	for _, f := range secretFlags {
		if fs.Changed(f.inline) {
			set = append(set, f.inline)
		}
	}
	return set
}

// warnSecretsOnCommandLine logs one deprecation warning per secret flag
// given on the command line. They keep working: a warning, not a
// refusal, so that an upgrade does not stop a running setup.
func warnSecretsOnCommandLine(log *slog.Logger, inline []string) {
	for _, name := range inline {
		for _, f := range secretFlags {
			if f.inline == name {
				log.Warn("deprecated: --"+name+" on the command line shows its URL, which may hold a credential, to every user of the host (ps); "+
					"give it with --"+f.file+" or in the --config file", "flag", name)
			}
		}
	}
}
