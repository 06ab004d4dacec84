package workload

import "github.com/sluice-dev/sluice/api"

// Resend makes the worker report every version of the rollout again, even
// unchanged, in order with its other reports: the machine expects a report
// of every set after each ScaleWorkloads, and a report read here and sent
// from another goroutine could overtake a newer one from the worker.
func (m *Manager) Resend(key api.Key) {
	m.forcedMu.Lock()
	m.forced[key] = true
	m.forcedMu.Unlock()
	m.queue.Add(key)
}

// takeForced reports whether a Resend is pending for key, and clears it.
func (m *Manager) takeForced(key api.Key) bool {
	m.forcedMu.Lock()
	defer m.forcedMu.Unlock()
	f := m.forced[key]
	delete(m.forced, key)
	return f
}
