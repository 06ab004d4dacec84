package rollout

import "github.com/sluice-dev/sluice/api"

// ExperimentStatus is the experiment of the current step while it runs
// (status field "experiment"; docs/http-api.md).
type ExperimentStatus struct {
	// Step is the experiment's step index, from 0.
	Step int32 `json:"step"`
	// Available: every template's pods were Ready, and the analyses and
	// the duration started; Elapsed: the duration has passed.
	Available bool                       `json:"available"`
	Elapsed   bool                       `json:"elapsed"`
	Templates []ExperimentTemplateStatus `json:"templates"`
	Analyses  []ExperimentAnalysisRun    `json:"analyses"`
}

// ExperimentTemplateStatus is one template of a running experiment and
// the ReplicaSet that runs it.
type ExperimentTemplateStatus struct {
	Name       string      `json:"name"`
	SpecRef    api.SpecRef `json:"specRef"`
	Version    string      `json:"version"`
	Hash       string      `json:"hash"`
	ReplicaSet string      `json:"replicaSet"`
	Replicas   int32       `json:"replicas"`
}

// experimentStatus is the running experiment for status, nil when none.
func (s State) experimentStatus() *ExperimentStatus {
	x := s.Experiment
	if x == nil {
		return nil
	}
	out := &ExperimentStatus{Step: x.Step, Available: x.Available, Elapsed: x.Elapsed,
		Templates: []ExperimentTemplateStatus{}, Analyses: append([]ExperimentAnalysisRun{}, x.Runs...)}
	for _, e := range x.Sets {
		out.Templates = append(out.Templates, ExperimentTemplateStatus{Name: e.Template.Name, SpecRef: e.Template.SpecRef,
			Version: e.Version, Hash: e.Hash, ReplicaSet: api.ExperimentReplicaSetName(s.Key.Name, e.Template.Name, e.Hash), Replicas: e.Template.Replicas})
	}
	return out
}
