package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/scheduler"
)

// A Kubernetes layer (or a planning tool) feeds nodes and running pods in
// through Update, then asks for placements.
func Example() {
	s, err := scheduler.New(scheduler.Options{
		Graph: scheduler.GraphOptions{TopologyKeys: []string{scheduler.LabelZone}},
		Seed:  1,
		Clock: func() time.Time { return time.Unix(0, 0) },
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	_ = s.Update(func(g *scheduler.Graph) error {
		for i, zone := range []string{"a", "a", "b"} {
			err := g.AddNode(scheduler.Node{
				Name:     fmt.Sprintf("node-%d", i),
				Labels:   map[string]string{scheduler.LabelZone: zone},
				Capacity: scheduler.Resources{MilliCPU: 4000, Memory: 8 << 30, Pods: 10},
				Heat:     float64(i) / 10,
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	for i := range 3 {
		pod := scheduler.Pod{
			Name:     fmt.Sprintf("default/web-canary-%d", i),
			Group:    "default/web/canary",
			Service:  "default/web",
			Role:     scheduler.RoleCanary,
			Requests: scheduler.Resources{MilliCPU: 500, Memory: 256 << 20},
		}
		r := s.ScheduleOne(context.Background(), &pod)
		fmt.Println(pod.Name, "->", r.Node, r.Status)
	}
	// Output:
	// default/web-canary-0 -> node-0 Success
	// default/web-canary-1 -> node-2 Success
	// default/web-canary-2 -> node-1 Success
}
