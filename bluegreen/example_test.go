package bluegreen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Enabling blue/green routing with holdfast: the zero Config uses the
// documented defaults.
func Example() {
	ctx := context.Background()
	f, err := holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{}))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close() // stops the blue/green monitors

	cfg, err := pgxpool.ParseConfig("postgres://app@orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com/orders?sslmode=verify-full")
	if err != nil {
		log.Fatal(err)
	}
	pool, err := f.NewPool(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	st := f.BlueGreen(pool).Status()
	fmt.Println(st.Phase, st.Routing.Normal)
}

// The summary logged at the end of a switchover, in the AWS wrappers' form.
func ExampleSummary_String() {
	in := time.Date(2026, 2, 15, 14, 30, 49, 762_000_000, time.UTC)
	at := func(ms int) time.Time { return in.Add(time.Duration(ms) * time.Millisecond) }
	s := bluegreen.Summary{ID: "1", Outcome: bluegreen.OutcomeCompleted, Anchor: in, Events: []bluegreen.Event{
		{Time: at(-21572), Name: "PREPARATION"},
		{Time: at(0), Name: "IN_PROGRESS"},
		{Time: at(2167), Name: "POST"},
		{Time: at(32584), Name: "Green topology changed"},
		{Time: at(41552), Name: "Blue DNS updated"},
		{Time: at(77651), Name: "Green DNS removed"},
		{Time: at(77651), Name: "COMPLETED"},
	}}
	fmt.Println(s)
	// Output:
	// [bgdId: '1'] Blue/Green Deployment switchover COMPLETED
	// timestamp                         time offset (ms)                           event
	// ----------------------------------------------------------------------------------
	//     2026-02-15T14:30:28.190Z             -21572 ms                     PREPARATION
	//     2026-02-15T14:30:49.762Z                  0 ms                     IN_PROGRESS
	//     2026-02-15T14:30:51.929Z               2167 ms                            POST
	//     2026-02-15T14:31:22.346Z              32584 ms          Green topology changed
	//     2026-02-15T14:31:31.314Z              41552 ms                Blue DNS updated
	//     2026-02-15T14:32:07.413Z              77651 ms               Green DNS removed
	//     2026-02-15T14:32:07.413Z              77651 ms                       COMPLETED
	// ----------------------------------------------------------------------------------
}

// A held connection that reached its bound is retryable; a rejected green
// host name is not.
func ExampleRule() {
	c := classify.New(bluegreen.Rule)
	held := &bluegreen.SuspendError{Op: "connect", Host: "orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com",
		Phase: bluegreen.InProgress, Waited: 30 * time.Second, Err: context.DeadlineExceeded}
	rejected := &bluegreen.RejectError{Host: "orders-green-abc123.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com", Phase: bluegreen.Post}
	var se *bluegreen.SuspendError // what errors.As finds in an Acquire's or a query's error
	var re *bluegreen.RejectError
	fmt.Println(c.Classify(held), errors.As(held, &se))
	fmt.Println(c.Classify(rejected), errors.As(rejected, &re))
	fmt.Println(held)
	// Output:
	// transient/bluegreen-suspended true
	// fatal/bluegreen-rejected true
	// bluegreen: connect to orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com held for 30s by the blue/green switchover (IN_PROGRESS) and not released: context deadline exceeded
}

// A Status is served as JSON (package readiness does): phases, engines,
// roles and outcomes by name.
func ExampleStatus() {
	at := time.Date(2026, 2, 15, 14, 31, 24, 7_000_000, time.UTC)
	st := bluegreen.Status{
		ID: "1", Phase: bluegreen.Created, Generation: 1, Engine: bluegreen.EngineAurora,
		Routing: bluegreen.Routing{Normal: true, Phase: bluegreen.Created},
		Monitors: []bluegreen.MonitorStatus{
			{Role: "SOURCE", Host: "orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com", Connected: true, Observation: "rows", Phase: bluegreen.Created, Status: "AVAILABLE", Connects: 1},
			{Role: "TARGET", Host: "orders-green-abc123.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com", Connected: true, Observation: "rows", Phase: bluegreen.Created, Status: "AVAILABLE", Connects: 2},
		},
		LastSummary: &bluegreen.Summary{ID: "1", Outcome: bluegreen.OutcomeCompleted, Anchor: at, Events: []bluegreen.Event{{Time: at, Name: "Routing normal"}}},
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// {
	//   "id": "1",
	//   "phase": "CREATED",
	//   "generation": 1,
	//   "engine": "aurora",
	//   "routing": {
	//     "normal": true,
	//     "phase": "CREATED",
	//     "suspend_queries": false
	//   },
	//   "last_summary": {
	//     "id": "1",
	//     "outcome": "COMPLETED",
	//     "anchor": "2026-02-15T14:31:24.007Z",
	//     "events": [
	//       {
	//         "time": "2026-02-15T14:31:24.007Z",
	//         "event": "Routing normal"
	//       }
	//     ]
	//   },
	//   "monitors": [
	//     {
	//       "role": "SOURCE",
	//       "host": "orders.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com",
	//       "connected": true,
	//       "observation": "rows",
	//       "phase": "CREATED",
	//       "status": "AVAILABLE",
	//       "connects": 1
	//     },
	//     {
	//       "role": "TARGET",
	//       "host": "orders-green-abc123.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com",
	//       "connected": true,
	//       "observation": "rows",
	//       "phase": "CREATED",
	//       "status": "AVAILABLE",
	//       "connects": 2
	//     }
	//   ],
	//   "waiting": 0,
	//   "dropped": 0,
	//   "rejected": 0,
	//   "timed_out": 0,
	//   "aliased_certs": 0
	// }
}
