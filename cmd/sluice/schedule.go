package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/scheduler/plan"
	"github.com/spf13/cobra"
	sigsyaml "sigs.k8s.io/yaml"
)

type scheduleOptions struct {
	nodes      string
	rollout    string
	name       string
	replicas   int32
	baseline   bool
	explain    string
	top        int
	seed       uint64
	domainKey  string
	maxSkew    int32
	avoid      []string
	dependsOn  []string
	weights    []string
	percentage int32
	output     string
}

func newScheduleCmd() *cobra.Command {
	var o scheduleOptions
	cmd := &cobra.Command{
		Use:   "schedule --nodes NODES.yaml --rollout ROLLOUT.yaml",
		Short: "Plan where a rollout's canary (and baseline) pods would go",
		Long: `Place a rollout's canary pods (and with --baseline as many baseline pods, each
in the same zone and on the same node type as a canary pod) on the nodes in
NODES.yaml with sluice's graph scheduler, and print each placement, the pod
count per failure domain and the skew. Requests, node selector, required
node affinity and tolerations come from the rollout's pod template; the
annotation sluice.io/depends-on lists services to be near.

--explain POD shows, for that pod, why each rejected node was filtered and
the score breakdown of the best nodes.

Exit status: 0 all pods placed, 1 some pods unschedulable, 2 trouble.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSchedule(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.nodes, "nodes", "", "nodes file (YAML): nodes with labels, taints, capacity, allocated, heat")
	f.StringVar(&o.rollout, "rollout", "", "rollout file or directory")
	f.StringVar(&o.name, "name", "", "rollout (namespace/name or name) when the files hold several")
	f.Int32Var(&o.replicas, "replicas", 0, "canary pods to place (default: the rollout's replicas)")
	f.BoolVar(&o.baseline, "baseline", false, "also place baseline pods matched to the canary")
	f.StringVar(&o.explain, "explain", "", "explain the placement of this pod (e.g. default/checkout-canary-0)")
	f.IntVar(&o.top, "top", 5, "with --explain: how many best nodes to show")
	f.Uint64Var(&o.seed, "seed", 1, "seed for tie-breaking; the same seed gives the same plan")
	f.StringVar(&o.domainKey, "domain-key", "", "failure-domain topology key (default the zone key)")
	f.Int32Var(&o.maxSkew, "max-skew", 1, "most a domain's canary pods may exceed the emptiest domain's")
	f.StringSliceVar(&o.avoid, "avoid", nil, "critical services (namespace/name) whose failure domains to avoid")
	f.StringSliceVar(&o.dependsOn, "depends-on", nil, "services the pods depend on, in addition to the annotation")
	f.StringSliceVar(&o.weights, "weight", nil, "score plugin weight, PLUGIN=N (LeastHeat, DependencyAffinity, TopologySpread, BaselineMatch)")
	f.Int32Var(&o.percentage, "percentage-of-nodes-to-score", 0, "share of nodes to find feasible before scoring (0 adaptive, 100 all)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	_ = cmd.MarkFlagRequired("nodes")
	_ = cmd.MarkFlagRequired("rollout")
	return cmd
}

func runSchedule(cmd *cobra.Command, o scheduleOptions) error {
	switch o.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("unknown output format %q (use table, json or yaml)", o.output)
	}
	cluster, err := plan.ReadCluster(o.nodes)
	if err != nil {
		return err
	}
	ro, err := pickRollout(cmd.ErrOrStderr(), o.rollout, o.name)
	if err != nil {
		return err
	}
	weights, err := parseWeights(o.weights)
	if err != nil {
		return err
	}
	rep, err := plan.Run(cmd.Context(), plan.Options{
		Cluster: cluster, Rollout: ro, Replicas: o.replicas, Baseline: o.baseline,
		Explain: o.explain, TopN: o.top, Seed: o.seed,
		DomainKey: o.domainKey, MaxSkew: o.maxSkew, Critical: o.avoid, DependsOn: o.dependsOn,
		Weights: weights, PercentageOfNodesToScore: o.percentage,
	})
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	switch o.output {
	case "json", "yaml":
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		if o.output == "yaml" {
			if data, err = sigsyaml.JSONToYAML(data); err != nil {
				return fmt.Errorf("encode report: %w", err)
			}
		} else {
			data = append(data, '\n')
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	default:
		if err := rep.WriteTable(w); err != nil {
			return err
		}
	}
	if len(rep.Unschedulable) > 0 {
		return exitError{code: 1}
	}
	return nil
}

// pickRollout loads the rollout files and returns the one rollout asked
// for (or the only one). Load errors are printed like `sluice validate`.
func pickRollout(stderr io.Writer, path, name string) (*api.Rollout, error) {
	set, err := api.LoadPaths(path)
	if err != nil {
		return nil, err
	}
	if set.Diagnostics.HasErrors() {
		for _, d := range set.Diagnostics {
			fmt.Fprintln(stderr, d)
		}
		return nil, fmt.Errorf("%s: invalid strategy files", path)
	}
	if name != "" {
		if r := set.Rollout(api.ParseKey(name)); r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("%s: no rollout %s", path, name)
	}
	switch len(set.Rollouts) {
	case 0:
		return nil, fmt.Errorf("%s: no rollout", path)
	case 1:
		return set.Rollouts[0], nil
	}
	return nil, fmt.Errorf("%s: %d rollouts, choose one with --name", path, len(set.Rollouts))
}

func parseWeights(specs []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, s := range specs {
		k, v, ok := strings.Cut(s, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("--weight %q: want PLUGIN=N with N ≥ 0", s)
		}
		out[k] = n
	}
	return out, nil
}
