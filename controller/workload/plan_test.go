package workload

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/controller/rollout"
)

func TestPlanScale(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	stable := rollout.WorkloadSet{Role: rollout.RoleStable, Version: "v1", Hash: "h1", Replicas: 3}
	canary := rollout.WorkloadSet{Role: rollout.RoleCanary, Version: "v2", Hash: "h2", Replicas: 1}
	ours := func(name, hash string, rev int64, role string, replicas int32, age int) replicaSetFacts {
		return replicaSetFacts{Name: name, Hash: hash, Ours: true, OfRollout: true, Revision: rev, Role: role,
			Replicas: replicas, Created: t0.Add(time.Duration(age) * time.Minute)}
	}
	type applied struct {
		Name     string
		Hash     string
		Revision int64
	}
	tests := []struct {
		name    string
		sets    []rollout.WorkloadSet
		have    []replicaSetFacts
		limit   int
		apply   []applied
		retire  []string
		delete  []string
		wantErr string
	}{{
		name:  "first sets: canonical names, canary newest whatever the order given",
		sets:  []rollout.WorkloadSet{canary, stable},
		limit: 10,
		apply: []applied{{"co-h1", "h1", 1}, {"co-h2", "h2", 2}},
	}, {
		name:  "repeat keeps the revisions of sets still wanted",
		sets:  []rollout.WorkloadSet{stable, canary},
		have:  []replicaSetFacts{ours("co-h1", "h1", 1, "stable", 3, 0), ours("co-h2", "h2", 2, "canary", 1, 1)},
		limit: 10,
		apply: []applied{{"co-h1", "h1", 1}, {"co-h2", "h2", 2}},
	}, {
		name:  "adopts a ReplicaSet of the hash under another name",
		sets:  []rollout.WorkloadSet{stable},
		have:  []replicaSetFacts{{Name: "legacy", Hash: "h1", OfRollout: true, Replicas: 2, Created: t0}},
		limit: 10,
		apply: []applied{{"legacy", "h1", 1}},
	}, {
		name: "prefers sluice's name over another of the same hash, which is retired",
		sets: []rollout.WorkloadSet{stable},
		have: []replicaSetFacts{
			ours("aaa", "h1", 1, "stable", 3, 0),
			ours("co-h1", "h1", 2, "stable", 3, 1),
		},
		limit:  10,
		apply:  []applied{{"co-h1", "h1", 2}},
		retire: []string{"aaa"},
	}, {
		name:  "never adopts another rollout's ReplicaSet of the same hash",
		sets:  []rollout.WorkloadSet{stable},
		have:  []replicaSetFacts{{Name: "other-h1", Hash: "h1", Revision: 7, Created: t0}},
		limit: 10,
		apply: []applied{{"co-h1", "h1", 8}},
	}, {
		name: "a version back from the history becomes the newest",
		sets: []rollout.WorkloadSet{stable},
		have: []replicaSetFacts{
			ours("co-h1", "h1", 1, RoleInactive, 0, 0),
			ours("co-h3", "h3", 2, "stable", 3, 1),
		},
		limit:  10,
		apply:  []applied{{"co-h1", "h1", 3}},
		retire: []string{"co-h3"},
	}, {
		name: "old sets past the history limit are deleted, newest kept, inactive ones left alone",
		sets: []rollout.WorkloadSet{{Role: rollout.RoleStable, Version: "v5", Hash: "h5", Replicas: 3}},
		have: []replicaSetFacts{
			ours("co-h1", "h1", 1, RoleInactive, 0, 0),
			ours("co-h2", "h2", 2, RoleInactive, 0, 1),
			ours("co-h3", "h3", 3, RoleInactive, 0, 2),
			ours("co-h4", "h4", 4, "stable", 3, 3),
		},
		limit:  2,
		apply:  []applied{{"co-h5", "h5", 5}},
		retire: []string{"co-h4"},
		delete: []string{"co-h2", "co-h1"},
	}, {
		name:   "history limit 0 deletes every unwanted set",
		sets:   []rollout.WorkloadSet{stable},
		have:   []replicaSetFacts{ours("co-h9", "h9", 1, "stable", 3, 0)},
		limit:  0,
		apply:  []applied{{"co-h1", "h1", 2}},
		delete: []string{"co-h9"},
	}, {
		name:   "no sets: everything to 0",
		have:   []replicaSetFacts{ours("co-h1", "h1", 1, "stable", 3, 0)},
		limit:  10,
		retire: []string{"co-h1"},
	}, {
		name:    "two sets of one hash",
		sets:    []rollout.WorkloadSet{stable, {Role: rollout.RoleCanary, Hash: "h1"}},
		limit:   10,
		wantErr: "two sets with pod-template hash h1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := planScale("co", tt.sets, tt.have, tt.limit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []applied
			for _, s := range p.Apply {
				got = append(got, applied{s.Name, s.Set.Hash, s.Revision})
			}
			if !reflect.DeepEqual(got, tt.apply) {
				t.Errorf("apply = %+v, want %+v", got, tt.apply)
			}
			if !reflect.DeepEqual(p.Retire, tt.retire) {
				t.Errorf("retire = %v, want %v", p.Retire, tt.retire)
			}
			if !reflect.DeepEqual(p.Delete, tt.delete) {
				t.Errorf("delete = %v, want %v", p.Delete, tt.delete)
			}
		})
	}
}
