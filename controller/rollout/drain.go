package rollout

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// This file keeps the pods of a version that lost its traffic (the old
// stable after a promotion, an aborted, replaced or rolled-back canary)
// until clients ACK the move and a scale-down delay has passed: move
// traffic away → ACK → delay → scale down (Kubernetes mode).

// Drain is a version that lost its traffic and keeps its pods (Role old in
// ScaleWorkloads) until its timer fires.
type Drain struct {
	Version  string       `json:"version"`
	Hash     string       `json:"hash"`
	Replicas int32        `json:"replicas"`
	Spec     *api.Rollout `json:"spec"`
	// Delay starts when clients ACK traffic generation Gen (the move that
	// took the traffic away) or a later one.
	Delay time.Duration `json:"delay"`
	Gen   uint64        `json:"gen"`
	// Timer is armed on that ACK.
	Timer *Timer `json:"timer,omitempty"`
}

// drain keeps hash's current pods until the ACK of the traffic pushed in
// this Step plus delay. A version that ran no pods and may get no traffic
// needs no drain.
func (m *machine) drain(version, hash string, spec *api.Rollout, delay time.Duration) {
	replicas := m.s.desired(hash)
	if !m.s.kubernetes() || hash == "" || replicas == 0 && m.s.share(hash) == 0 {
		return
	}
	d := Drain{Version: version, Hash: hash, Replicas: replicas, Spec: spec, Delay: delay, Gen: m.pushTraffic()}
	for i := range m.s.Drains {
		if m.s.Drains[i].Hash == hash {
			m.cancelDrainTimer(m.s.Drains[i])
			m.s.Drains[i] = d
			return
		}
	}
	m.s.Drains = append(m.s.Drains, d)
}

// armDrains starts the delay of every drain whose move generation gen
// carries, on its ACK. An ACK timeout settles the phase but starts no
// delay: clients that did not ACK may still route to the old pods.
func (m *machine) armDrains(gen uint64) {
	for i, d := range m.s.Drains {
		if d.Timer != nil || gen < d.Gen {
			continue
		}
		t := Timer{ID: fmt.Sprintf("scaledown/%s/%d", d.Hash, m.s.Seq+1), Duration: d.Delay}
		m.s.Drains[i].Timer = &t
		m.emit(StartTimer{Timer: t})
	}
}

// drainTimerFired ends the drain whose delay passed; its set leaves the
// next ScaleWorkloads, which scales it to 0. It reports whether id was a
// drain's timer.
func (m *machine) drainTimerFired(id string) bool {
	for i, d := range m.s.Drains {
		if d.Timer != nil && d.Timer.ID == id {
			m.s.Drains = append(m.s.Drains[:i:i], m.s.Drains[i+1:]...)
			return true
		}
	}
	return false
}

// dropActiveDrains ends the drain of a version that is stable or canary
// again (a retry, the old version pushed again): its role takes over.
func (m *machine) dropActiveDrains() {
	var keep []Drain
	for _, d := range m.s.Drains {
		if h, ok := m.s.baseline(); d.Hash == m.s.StableHash || m.s.canaryServed() && d.Hash == m.s.CanaryHash || ok && d.Hash == h {
			m.cancelDrainTimer(d)
			continue
		}
		keep = append(keep, d)
	}
	m.s.Drains = keep
}

func (m *machine) cancelDrainTimer(d Drain) {
	if d.Timer != nil {
		m.emit(CancelTimer{ID: d.Timer.ID})
	}
}

// rearmDrains re-arms the armed drain timers after a restart; like a
// pause, a re-armed delay runs its whole length again.
func (m *machine) rearmDrains() {
	for _, d := range m.s.Drains {
		if d.Timer != nil {
			m.emit(StartTimer{Timer: *d.Timer})
		}
	}
}
