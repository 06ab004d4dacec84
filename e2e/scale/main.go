package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := Config{Log: stderr}
	fs.IntVar(&cfg.Rollouts, "rollouts", 10000, "rollouts in the generated repository")
	fs.IntVar(&cfg.Namespaces, "namespaces", 100, "namespaces they are spread over")
	fs.IntVar(&cfg.GRPCHosts, "grpc-hosts", 500, "hosts with a real gRPC xDS client each")
	fs.DurationVar(&cfg.Idle, "idle", 5*time.Minute, "how long idle CPU is measured")
	fs.IntVar(&cfg.Changed, "changed", 1000, "rollouts one commit moves to a new image (0: skip the changes)")
	fs.DurationVar(&cfg.CommitProfile, "commit-profile", 0, "profile the daemon's CPU and allocations over this long from the commit's webhook (whole seconds; commit-cpu.pb.gz and commit-allocs.pb.gz in the work directory: add -keep)")
	fs.StringVar(&cfg.Sluice, "sluice", "", "sluice binary (default: build ./cmd/sluice)")
	daemonArgs := fs.String("daemon-args", "", "extra flags for sluice run, space-separated (e.g. \"--debug-addr 127.0.0.1:6061\")")
	keep := fs.Bool("keep", false, "keep the work directory (repository, state, the daemon's log)")
	out := fs.String("o", "table", "output: table or json")
	kube := fs.Bool("kube", false, "Kubernetes mode: informer memory of sluice run --kubernetes on the test control plane (docs/scale.md#kubernetes-mode)")
	kcfg := KubeConfig{Log: stderr}
	fs.IntVar(&kcfg.Nodes, "nodes", 30, "with -kube: kwok nodes over three zones")
	fs.IntVar(&kcfg.ForeignPods, "foreign-pods", 2000, "with -kube: unlabelled pods created once every rollout is Healthy")
	fs.IntVar(&kcfg.ForeignReplicaSets, "foreign-replicasets", 200, "with -kube: unlabelled ReplicaSets (0 replicas) created with them")
	fs.IntVar(&kcfg.Clusters, "clusters", 1, "with -kube: control planes (home and N-1 more); above 1 every rollout runs across all of them in one wave per cluster, and one commit's waves are timed (docs/scale.md#kubernetes-mode-across-clusters)")
	fs.StringVar(&kcfg.StateStore, "state-store", "kubernetes", "with -kube -clusters: sluice's --state-store (kubernetes or bbolt)")
	fs.StringVar(&kcfg.KCMArgs, "kcm-args", "", "with -kube: extra kube-controller-manager flags, space-separated (e.g. \"--kube-api-qps=100 --kube-api-burst=200\")")
	peer := fs.String("peer", "", "with -kube: run the same rollouts side by side under this other controller on a second identical control plane: argo (Argo Rollouts' controller with kube-scheduler; docs/scale.md#side-by-side-with-argo-rollouts-controller)")
	argoArgs := fs.String("argo-args", "", "with -peer argo: extra rollouts-controller flags, space-separated (e.g. \"--qps=200 --burst=400\")")
	peerProfile := fs.Bool("peer-profile", false, "with -peer argo: profile sluice through the change (CPU over its first minute; heap, goroutines and a /metrics scrape at each new RSS high); they add to sluice's RSS, so compare RSS on a run without")
	schedulerQPS := fs.Float64("scheduler-qps", 50, "with -peer argo: kube-scheduler's client QPS (burst twice that; 50 is kube-scheduler's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *peer != "" {
		if !*kube {
			return fmt.Errorf("-peer: only with -kube")
		}
		if kcfg.Clusters != 1 {
			return fmt.Errorf("-peer: not with -clusters")
		}
		if set["foreign-pods"] || set["foreign-replicasets"] {
			return fmt.Errorf("-foreign-pods, -foreign-replicasets: not with -peer")
		}
		kcfg.ForeignPods, kcfg.ForeignReplicaSets = 0, 0
	} else if set["argo-args"] || set["scheduler-qps"] || set["peer-profile"] {
		return fmt.Errorf("-argo-args, -scheduler-qps, -peer-profile: only with -peer argo")
	}
	if *out != "table" && *out != "json" {
		return fmt.Errorf("-o %q: want table or json", *out)
	}
	if !*kube && kcfg.Clusters != 1 {
		return fmt.Errorf("-clusters: only with -kube")
	}
	if *kube && set["commit-profile"] {
		return fmt.Errorf("-commit-profile: not with -kube (-peer-profile profiles the change there)")
	}
	if cfg.CommitProfile < 0 || cfg.CommitProfile%time.Second != 0 {
		return fmt.Errorf("-commit-profile %v: whole seconds (what /debug/pprof takes)", cfg.CommitProfile)
	}
	if *kube {
		// Re-executes this program in a network namespace where kwok's
		// pod IPs are local; returns at once inside it.
		kubetest.EnterNetns()
	}
	dir, err := os.MkdirTemp("", "sluice-scale-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(stderr, "work directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	cfg.Dir = dir
	cfg.DaemonArgs = strings.Fields(*daemonArgs)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *kube {
		kcfg.Rollouts, kcfg.Namespaces, kcfg.Sluice, kcfg.Dir, kcfg.DaemonArgs = cfg.Rollouts, cfg.Namespaces, cfg.Sluice, cfg.Dir, cfg.DaemonArgs
		if *peer != "" {
			res, err := RunKubePeer(ctx, PeerConfig{KubeConfig: kcfg, Peer: *peer, ArgoArgs: strings.Fields(*argoArgs), SchedulerQPS: float32(*schedulerQPS), Profile: *peerProfile})
			if err != nil {
				return err
			}
			if *out == "json" {
				return writeJSON(stdout, res)
			}
			return printPeerTable(stdout, res)
		}
		if kcfg.Clusters > 1 {
			res, err := RunKubeClusters(ctx, kcfg)
			if err != nil {
				return err
			}
			if *out == "json" {
				return writeJSON(stdout, res)
			}
			return printClustersTable(stdout, res)
		}
		res, err := RunKube(ctx, kcfg)
		if err != nil {
			return err
		}
		if *out == "json" {
			return writeJSON(stdout, res)
		}
		return printKubeTable(stdout, res)
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *out == "json" {
		return writeJSON(stdout, res)
	}
	return printTable(stdout, res)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printTable(w io.Writer, r Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	mib := func(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }
	rows := [][2]string{
		{"rollouts / namespaces / gRPC hosts", fmt.Sprintf("%d / %d / %d", r.Rollouts, r.Namespaces, r.GRPCHosts)},
		{"load average (start → end)", r.LoadAverageStart + " → " + r.LoadAverageEnd},
		{"start → /readyz", fmt.Sprintf("%.1f s", r.ReadySeconds)},
		{"start → every host's scope and route on Envoy-shaped (delta)", fmt.Sprintf("%.1f s", r.FirstSnapshotSeconds)},
		{"start → every gRPC client resolved", fmt.Sprintf("%.1f s", r.GRPCResolvedSeconds)},
		{"idle RSS (VmRSS)", mib(float64(r.RSSBytes))},
		{"peak RSS from the start (VmHWM)", mib(float64(r.LoadPeakRSSBytes))},
		{"idle Go heap in use", mib(r.HeapInuseBytes)},
		{"idle goroutines", fmt.Sprintf("%.0f", r.Goroutines)},
		{fmt.Sprintf("idle CPU over %.0f s", r.IdleSeconds), fmt.Sprintf("%.2f %% of one core", r.IdleCPUPercent)},
		{"/metrics size / series / render", fmt.Sprintf("%.1f KiB / %d / %.0f ms", float64(r.MetricsBytes)/1024, r.MetricsSeries, r.MetricsRenderSeconds*1000)},
	}
	if r.Changed > 0 {
		rows = append(rows,
			[2]string{"one rollout changed: bytes to Envoy-shaped (delta)", fmt.Sprintf("%d B in %d responses", r.OneChangeEnvoyBytes, r.OneChangeEnvoyResponses)},
			[2]string{"one rollout changed: bytes to its gRPC client", fmt.Sprintf("%d B in %d responses", r.OneChangeGRPCBytes, r.OneChangeGRPCResponses)},
			[2]string{fmt.Sprintf("commit of %d: webhook → status at step 1 (ACKed)", r.Changed), fmt.Sprintf("p50 %.2f s  p99 %.2f s  max %.2f s", r.StatusP50, r.StatusP99, r.StatusMax)},
			[2]string{fmt.Sprintf("  same, through %d gRPC clients' resolvers", r.ClientsMeasured), fmt.Sprintf("p50 %.2f s  p99 %.2f s  max %.2f s", r.ClientP50, r.ClientP99, r.ClientMax)},
			[2]string{"  daemon CPU until the last at step 1", fmt.Sprintf("%.1f s (%.0f %% of one core)", r.CommitCPUSeconds, r.CommitCPUPercent)},
			[2]string{"  daemon CPU until the last past its analysis (step 2)", fmt.Sprintf("%.1f s", r.CommitStep2CPUSeconds)},
			[2]string{"  memory allocated until then", mib(r.CommitAllocatedBytes)},
			[2]string{"  peak RSS until then (VmHWM, reset at the webhook)", mib(float64(r.CommitPeakRSSBytes))},
			[2]string{"  ACK timeouts / status times from polling", fmt.Sprintf("%d / %d", r.AckTimeouts, r.StatusPolled)},
			[2]string{fmt.Sprintf("%d canaries in analysis: first at step 1 → last past it", r.Changed), fmt.Sprintf("%.1f s", r.AnalysisSeconds)},
			[2]string{"  runner transitions (visible) / s", fmt.Sprintf("%.0f (%d)", r.TransitionsPerSecond, r.Transitions)},
			[2]string{"  analysis measurements / s", fmt.Sprintf("%.0f (%d)", r.MeasurementsPerSec, r.AnalysisMeasurements)},
			[2]string{"  connections opened to the analysis endpoint", fmt.Sprint(r.AnalysisConnections)},
			[2]string{"gRPC clients answered by the new version", fmt.Sprintf("%d of %d", r.ClientsAnsweredByNew, r.ClientsMeasured)},
		)
	}
	for _, p := range r.CommitProfiles {
		rows = append(rows, [2]string{"profile of the commit", p})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}
