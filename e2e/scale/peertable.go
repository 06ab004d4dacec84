package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// The side-by-side run's table: each figure of both controllers and their ratio.

func printPeerTable(w io.Writer, r PeerResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	s, a := r.Sluice, r.Argo
	sched := a.Scheduler
	if sched == nil {
		sched = &ProcessUsage{}
	}
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	secs := func(v float64) string { return fmt.Sprintf("%.1f s", v) }
	ratio := func(x, y float64) string {
		if y == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", x/y)
	}
	withSched := func(own, sch string) string { return own + " (+ " + sch + " kube-scheduler)" }
	anonFile := func(p ProcessUsage) string { return mib(p.SteadyAnonBytes) + " / " + mib(p.SteadyFileBytes) }
	rows := [][4]string{
		{"figure", "sluice", a.Controller + " + kube-scheduler", "sluice ÷ Argo"},
		{"rollouts / namespaces / nodes, each plane", fmt.Sprintf("%d / %d / %d", r.Rollouts, r.Namespaces, r.Nodes), "same", ""},
		{"kube-controller-manager extra flags, each plane", r.KCMArgs, "same", ""},
		{"controller flags beyond the defaults", flagsOrDefaults(r.Sluice.Args), flagsOrDefaults(r.ArgoExtraArgs) + "; kube-scheduler at " + fmt.Sprintf("%g QPS", r.SchedulerQPS), ""},
		{"load average: start → change → end", r.LoadAverageStart + " → " + r.LoadAverageAtChange + " → " + r.LoadAverageEnd, "same (one machine)", ""},
		{"start → every rollout Healthy, its pod Running", secs(s.HealthySeconds), secs(a.HealthySeconds), ratio(s.HealthySeconds, a.HealthySeconds)},
		{fmt.Sprintf("change → every rollout Paused at %d %%, canary pod Running", peerCanaryWeight), secs(s.PausedSeconds), secs(a.PausedSeconds), ratio(s.PausedSeconds, a.PausedSeconds)},
		{"  writing the change (git push, before it; the patches, within it)", secs(s.ChangeWriteSeconds), secs(a.ChangeWriteSeconds), ""},
		{"  canary pods Running then", fmt.Sprint(s.CanaryPodsRunning), fmt.Sprint(a.CanaryPodsRunning), ""},
		{fmt.Sprintf("RSS steady (%.0f s after Healthy)", r.SettleSeconds), mib(s.Process.SteadyRSSBytes), withSched(mib(a.Process.SteadyRSSBytes), mib(sched.SteadyRSSBytes)), ratio(float64(s.Process.SteadyRSSBytes), float64(a.Process.SteadyRSSBytes))},
		{"RSS peak, start → Healthy", mib(s.Process.LoadPeakRSSBytes), withSched(mib(a.Process.LoadPeakRSSBytes), mib(sched.LoadPeakRSSBytes)), ratio(float64(s.Process.LoadPeakRSSBytes), float64(a.Process.LoadPeakRSSBytes))},
		{"RSS peak, change → Paused", mib(s.Process.ChangePeakRSSBytes), withSched(mib(a.Process.ChangePeakRSSBytes), mib(sched.ChangePeakRSSBytes)), ratio(float64(s.Process.ChangePeakRSSBytes), float64(a.Process.ChangePeakRSSBytes))},
		{"  of the steady RSS: own memory (RssAnon) / binary's and other files' pages (RssFile)", anonFile(s.Process), withSched(anonFile(a.Process), anonFile(*sched)), ratio(float64(s.Process.SteadyAnonBytes), float64(a.Process.SteadyAnonBytes))},
		{"  own memory's peak, change → Paused (RssAnon, sampled each second)", mib(s.Process.ChangePeakAnonBytes), withSched(mib(a.Process.ChangePeakAnonBytes), mib(sched.ChangePeakAnonBytes)), ratio(float64(s.Process.ChangePeakAnonBytes), float64(a.Process.ChangePeakAnonBytes))},
		{"CPU, start → Healthy (ratio: to Argo + kube-scheduler)", secs(s.Process.LoadCPUSeconds), withSched(secs(a.Process.LoadCPUSeconds), secs(sched.LoadCPUSeconds)), ratio(s.Process.LoadCPUSeconds, a.Process.LoadCPUSeconds+sched.LoadCPUSeconds)},
		{"CPU, change → Paused (ratio: to Argo + kube-scheduler)", secs(s.Process.ChangeCPUSeconds), withSched(secs(a.Process.ChangeCPUSeconds), secs(sched.ChangeCPUSeconds)), ratio(s.Process.ChangeCPUSeconds, a.Process.ChangeCPUSeconds+sched.ChangeCPUSeconds)},
		{"control plane CPU, change → Paused", planeCPUString(s.PlaneChangeCPUSeconds), planeCPUString(a.PlaneChangeCPUSeconds), ratio(sum(s.PlaneChangeCPUSeconds), sum(a.PlaneChangeCPUSeconds))},
		{"apiserver requests, change → Paused (every client's)", requestsString(s.PlaneChangeRequests, r.Rollouts), requestsString(a.PlaneChangeRequests, r.Rollouts), ratio(sum(s.PlaneChangeRequests), sum(a.PlaneChangeRequests))},
		{"idle CPU, every rollout Healthy", fmt.Sprintf("%.1f %%", s.Process.IdleCPUPercent), withSched(fmt.Sprintf("%.1f %%", a.Process.IdleCPUPercent), fmt.Sprintf("%.1f %%", sched.IdleCPUPercent)), ""},
		{"client-side throttling lines in the log", fmt.Sprint(s.ThrottleWaits), fmt.Sprint(a.ThrottleWaits), ""},
	}
	memRow := func(name string, m MemSnapshot) [4]string {
		return [4]string{name, fmt.Sprintf("RSS %s: heap in use %s, stacks %s, %.0f goroutines", mib(m.RSSBytes), mib(int64(m.HeapInuseBytes)), mib(int64(m.StackInuseBytes)), m.Goroutines), "", ""}
	}
	if r.SluiceMemory.Steady.RSSBytes > 0 { // -peer-profile
		rows = append(rows, memRow("sluice at the steady state (profiled)", r.SluiceMemory.Steady),
			memRow(fmt.Sprintf("sluice at the change's peak (%.0f s in, profiled)", r.SluiceMemory.ChangePeak.AtSeconds), r.SluiceMemory.ChangePeak))
	}
	if len(s.LogErrors)+len(s.LogWarnings) > 0 {
		rows = append(rows, [4]string{"sluice ERROR / WARN lines during the change", countsString(s.LogErrors) + " / " + countsString(s.LogWarnings), "", ""})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row[0], row[1], row[2], row[3])
	}
	return tw.Flush()
}

func flagsOrDefaults(args []string) string {
	if len(args) == 0 {
		return "none"
	}
	return strings.Join(args, " ")
}

// planeCPUString is a control plane's CPU, whole and by component.
func planeCPUString(byComponent map[string]float64) string {
	parts := make([]string, 0, len(kubetest.Components))
	for _, comp := range kubetest.Components {
		parts = append(parts, fmt.Sprintf("%s %.1f", comp, byComponent[comp]))
	}
	return fmt.Sprintf("%.1f s (%s)", sum(byComponent), strings.Join(parts, ", "))
}

func sum(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}

// requestsString is a request count, per rollout, and its four largest
// kinds.
func requestsString(byKind map[string]float64, rollouts int) string {
	kinds := slices.Collect(maps.Keys(byKind))
	slices.SortFunc(kinds, func(x, y string) int { return cmp.Or(cmp.Compare(byKind[y], byKind[x]), cmp.Compare(x, y)) })
	parts := make([]string, 0, 4)
	for _, k := range kinds[:min(4, len(kinds))] {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, byKind[k]))
	}
	return fmt.Sprintf("%.0f, %.1f a rollout (%s)", sum(byKind), sum(byKind)/float64(max(rollouts, 1)), strings.Join(parts, ", "))
}
