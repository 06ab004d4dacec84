package demo

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// ANSI sequences the terminal view uses: no colours, nothing a plain VT100
// would not understand.
const (
	ansiUp       = "\x1b[%dF" // cursor to the start of the line n lines up
	ansiClearEnd = "\x1b[J"   // clear from the cursor to the end of the screen
	ansiWrapOff  = "\x1b[?7l" // long lines are cut at the edge instead of wrapping,
	ansiWrapOn   = "\x1b[?7h" // so the line count used to move up stays right
)

// minObserved is how many answers make an observed split worth printing.
const minObserved = 100

// observeEvery is how often the plain view repeats the observed split
// when nothing else changes.
const observeEvery = 5 * time.Second

// Live shows frames: on a terminal it redraws one block in place; anywhere
// else it prints a line for each change, so a log or CI transcript reads
// as a story.
type Live struct {
	w   io.Writer
	tty bool

	drawn int // lines of the block on screen (terminal mode)

	// plain mode: what was already said
	stage         string
	status        string
	metrics       map[string]string
	eventSeq      uint64 // events carry increasing Seq; Frame.Events is a sliding tail
	alerts        int
	observedAt    time.Duration
	observedStage string // the stage of the last observed line: each stage gets one
}

// Mode says how a Live view writes.
type Mode int

// Modes of the live view.
const (
	// Lines prints one line per change: logs, pipes, CI.
	Lines Mode = iota
	// Terminal redraws one block in place.
	Terminal
)

// ModeOf is Terminal when tty is set, Lines otherwise.
func ModeOf(tty bool) Mode {
	if tty {
		return Terminal
	}
	return Lines
}

// NewLive returns a view writing to w in mode m.
func NewLive(w io.Writer, m Mode) *Live {
	return &Live{w: w, tty: m == Terminal, metrics: map[string]string{}}
}

// IsTerminal reports whether f is a character device (a terminal) and TERM
// does not say the terminal cannot move the cursor.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	return os.Getenv("TERM") != "dumb"
}

// Draw shows one frame.
func (l *Live) Draw(f Frame) error {
	if l.tty {
		return l.redraw(f)
	}
	return l.lines(f)
}

// Close ends the live view, leaving the last frame on screen.
func (l *Live) Close() error {
	if l.tty && l.drawn > 0 {
		l.drawn = 0 // the next Draw starts a new block below this one
		_, err := io.WriteString(l.w, ansiWrapOn)
		return err
	}
	return nil
}

func (l *Live) redraw(f Frame) error {
	var b bytes.Buffer
	if l.drawn > 0 {
		fmt.Fprintf(&b, ansiUp, l.drawn)
	} else {
		b.WriteString(ansiWrapOff)
	}
	b.WriteString(ansiClearEnd)
	var block bytes.Buffer
	Render(&block, f)
	l.drawn = bytes.Count(block.Bytes(), []byte("\n"))
	b.Write(block.Bytes())
	_, err := l.w.Write(b.Bytes()) // one write, so the terminal never shows half a frame
	return err
}

func (l *Live) lines(f Frame) error {
	var b strings.Builder
	say := func(format string, args ...any) {
		fmt.Fprintf(&b, "[%6.1fs] %s\n", f.Elapsed.Seconds(), fmt.Sprintf(format, args...))
	}
	if f.Stage != l.stage {
		l.stage = f.Stage
		say("%s", f.Stage)
	}
	changed := false
	if s := f.Status; s != nil {
		line := fmt.Sprintf("%-12s declared %d/%d  %s", s.Phase, s.Weights.Stable, s.Weights.Canary, s.Message)
		if line != l.status {
			l.status, changed = line, true
			say("%s", line)
		}
		for _, r := range s.AnalysisRuns {
			for _, m := range r.Metrics {
				k := r.Name + "/" + m.Name
				if m.Value == "" && m.Message == "" && (m.Phase == "" || m.Phase == "Pending" || m.Phase == "Running") {
					continue // nothing measured yet
				}
				v := fmt.Sprintf("%s value %s", verdict(string(m.Phase)), dash(m.Value))
				if m.Message != "" {
					v += " (" + m.Message + ")"
				}
				if l.metrics[k] != v {
					l.metrics[k] = v
					say("analysis %s %s: %s", r.Name, m.Name, v)
				}
			}
		}
	}
	if d := f.Observed.Class[probe.DefaultClass]; d.Answered() >= minObserved &&
		(changed || f.Stage != l.observedStage || f.Elapsed-l.observedAt >= observeEvery) {
		l.observedAt, l.observedStage = f.Elapsed, f.Stage
		line := "observed " + observedLine(f.Observed, stableOf(f.Status))
		if t := f.Observed.Class[TestersClass]; t.Answered() > 0 {
			line += "; testers → " + shares(t)
		}
		say("%s", line)
	}
	for _, e := range f.Events {
		if e.Seq > l.eventSeq {
			l.eventSeq = e.Seq
			if e.Type != "status" { // the status line above says it
				say("event %s: %s", e.Type, e.Message)
			}
		}
	}
	for _, a := range f.Alerts[min(l.alerts, len(f.Alerts)):] {
		if a.Severity != alert.SeverityInfo { // info alerts repeat the events
			say("ALERT at the webhook sink: %s (%s) for %s: %s", a.Event, a.Severity, a.Rollout, a.Reason)
		}
	}
	l.alerts = len(f.Alerts)
	_, err := io.WriteString(l.w, b.String())
	return err
}
