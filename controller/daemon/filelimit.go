package daemon

import (
	"log/slog"
	"syscall"

	"github.com/sluice-dev/sluice/controller/httpapi"
)

// fitToFileLimit keeps the API's connections within half the process's
// open-file limit, so that xDS, the git cache and the store always have
// descriptors left (finding K2: under 200 descriptors, idle API
// connections starved them all). Event streams hold a connection each and
// cannot be evicted, so they get at most half of the connections: the
// rest stay for /healthz and the other calls. The result is logged when
// it lowers what was asked.
func fitToFileLimit(l httpapi.Limits, log *slog.Logger) httpapi.Limits {
	d := httpapi.DefaultLimits()
	if l.MaxConnections <= 0 {
		l.MaxConnections = d.MaxConnections
	}
	if l.MaxEventStreams <= 0 {
		l.MaxEventStreams = d.MaxEventStreams
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 && rl.Cur/2 < uint64(l.MaxConnections) {
		log.Info("http connections lowered to half the open-file limit", "asked", l.MaxConnections, "nofile", rl.Cur, "max", rl.Cur/2)
		l.MaxConnections = max(int(rl.Cur/2), 1)
	}
	if half := max(l.MaxConnections/2, 1); l.MaxEventStreams > half {
		log.Info("event streams lowered to half the http connections", "asked", l.MaxEventStreams, "max", half)
		l.MaxEventStreams = half
	}
	return l
}
