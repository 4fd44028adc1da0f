package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/failover"
)

// A name of your own for the cluster endpoint (a CNAME) is routed as the
// endpoint once Aliases lists it; another name of your own needs
// InstanceTemplate, and is refused without it.
func ExampleConfig_aliases() {
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{
		Aliases: map[string]string{"db.orders.internal": "orders.cluster-abc123.us-east-1.rds.amazonaws.com"},
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	for _, host := range []string{"db.orders.internal", "db.billing.internal"} {
		cfg, err := pgxpool.ParseConfig("postgres://app@" + host + "/app")
		if err != nil {
			fmt.Println(err)
			return
		}
		err = f.Configure(cfg)
		fmt.Printf("%s: invalid %v\n", host, errors.As(err, new(*holdfast.ConfigError)))
	}
	// Output:
	// db.orders.internal: invalid false
	// db.billing.internal: invalid true
}

// The strict-reader mode of the AWS wrappers: reads wait, bounded, for a
// reader that is usable rather than go to the writer.
func ExampleReaderConfig() {
	c := failover.Config{Readers: failover.ReaderConfig{
		MaxLag:      time.Second,     // no new read connection to a reader lagging more
		Hold:        true,            // none usable: wait rather than read from the writer
		HoldTimeout: 2 * time.Second, // then fail the connect with a *HoldError
	}}
	f, err := holdfast.New(holdfast.WithFailover(c))
	fmt.Println(err)
	f.Close()

	// holdfast.New reports an invalid field by its name.
	c.Readers.MaxLag = -time.Second
	_, err = holdfast.New(holdfast.WithFailover(c))
	fmt.Println(err)
	// Output:
	// <nil>
	// holdfast: invalid WithFailover: invalid failover.Config: failover: invalid Config.Readers.MaxLag: negative
}

// Rule is what the factory's classifier knows of this package's errors;
// a classifier of your own takes it too.
func ExampleRule() {
	c := classify.New(failover.Rule)
	cut := fmt.Errorf("exec: %w", &failover.CutError{OldWriter: "orders-1", NewWriter: "orders-2", Addr: "10.0.0.1:5432", Err: io.EOF})
	held := fmt.Errorf("connect: %w", &failover.HoldError{Host: "orders.cluster-abc123.us-east-1.rds.amazonaws.com", Waited: 30 * time.Second, Err: context.DeadlineExceeded})
	fmt.Println(c.Classify(cut))
	fmt.Println(c.Classify(held))
	// Output:
	// transient/failover-cut
	// transient/failover-held
}

// A reader pool's connect that waited in vain for a usable reader.
func ExampleHoldError_reader() {
	err := fmt.Errorf("connect: %w", &failover.HoldError{
		Host: "orders.cluster-ro-abc123.us-east-1.rds.amazonaws.com", Waited: 2 * time.Second, Reader: true, Readers: 2, Err: context.DeadlineExceeded})
	var ne *failover.HoldError
	if errors.As(err, &ne) && ne.Reader {
		fmt.Println(ne.Readers, "readers, all lagging")
	}
	fmt.Println(errors.Is(err, context.DeadlineExceeded), pgconn.SafeToRetry(err))
	fmt.Println(err)
	// Output:
	// 2 readers, all lagging
	// true true
	// connect: failover: connect to orders.cluster-ro-abc123.us-east-1.rds.amazonaws.com held for 2s: all 2 readers lag beyond MaxLag: context deadline exceeded
}

// A Status as JSON, as readiness and dashboards read it.
func ExampleStatus() {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	st := failover.Status{
		Writer: "orders-2", WriterAddr: "10.0.0.2:5432", Routing: "redirect", Failovers: 1, Held: 3, MonitorConnects: 7,
		Events: []failover.Event{
			{At: at, Name: "writer down", Server: "orders-1"},
			{At: at.Add(2 * time.Second), Name: "new writer", Server: "orders-2"},
		},
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st)
	// Output:
	// {
	//   "writer": "orders-2",
	//   "writer_addr": "10.0.0.2:5432",
	//   "routing": "redirect",
	//   "failovers": 1,
	//   "held": 3,
	//   "monitor_connects": 7,
	//   "events": [
	//     {
	//       "at": "2026-12-03T10:00:00Z",
	//       "event": "writer down",
	//       "server": "orders-1"
	//     },
	//     {
	//       "at": "2026-12-03T10:00:02Z",
	//       "event": "new writer",
	//       "server": "orders-2"
	//     }
	//   ]
	// }
}

// An Aurora Global Database: a pool on the global writer endpoint follows
// the writer across Regions once Regions names each Region's instance
// endpoints (a Region's cluster endpoint gives them); the service's home
// Region turns its writes read-only while the writer is elsewhere, and a
// write then fails with a *WriterRegionError (OutOfHome), not retried.
func ExampleGlobalConfig() {
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{Global: failover.GlobalConfig{
		Regions: map[string]string{
			"us-east-1": "orders.cluster-abc123.us-east-1.rds.amazonaws.com",
			"us-west-2": "orders.cluster-def456.us-west-2.rds.amazonaws.com",
		},
		HomeRegion: "us-east-1",
		OutOfHome:  failover.OutOfHomeReadOnly,
	}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	cfg, err := pgxpool.ParseConfig("postgres://app@orders.global-xyz789abc123.global.rds.amazonaws.com/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("configured:", f.Configure(cfg) == nil)
	err = fmt.Errorf("tx: %w", &failover.WriterRegionError{Host: cfg.ConnConfig.Host, Region: "us-east-1", WriterRegion: "us-west-2", Writer: "orders-3", OutOfHome: true})
	we, ok := errors.AsType[*failover.WriterRegionError](err)
	fmt.Println(ok && we.OutOfHome, f.Classify(err).Retryable())
	// Output:
	// configured: true
	// true false
}
