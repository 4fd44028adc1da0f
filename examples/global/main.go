// Command global plays, on this machine and with real PostgreSQL servers,
// an Aurora Global Database's managed switchover or its failover with data
// loss, and runs the same write workload through a plain pgxpool and
// through a holdfast pool on the global writer endpoint, side by side.
//
// It starts a simulated global cluster of two Regions (package
// fakes/failovertest, StartGlobal): in the primary Region a writer and a
// reader, synchronous; in the secondary Region a server that streams from
// the writer through a link that holds the WAL back -lag (500 ms), and a
// reader that cascades from it. Every server has Aurora's status functions
// (aurora_global_db_instance_status(), aurora_global_db_status(),
// aurora_db_instance_identifier()). The names are Aurora's, in a fake DNS
// read through a client-side cache with a TTL (-dns-ttl): both pools
// connect by the global writer endpoint
// (NAME.global-ID.global.rds.amazonaws.com, a CNAME of the writer Region's
// cluster endpoint), with the same config, TLS verify-full on the global
// name (-tls).
//
// Two operations (-op):
//
//   - switchover (SwitchoverGlobalCluster, no data loss; the default): the
//     writer refuses writes (25006), the secondary catches up, the writer
//     shuts down (57P01), the secondary's first server is promoted, the old
//     writer restarts as a read-only standby of it, and the global writer
//     endpoint moves -dns-lag after the promotion (once every server
//     replayed the new status).
//   - failover (FailoverGlobalCluster --allow-data-loss): the link is cut
//     and the primary Region's servers crash, the secondary's first server
//     is promoted -detect later without waiting, the global writer endpoint
//     moves -dns-lag after that. What the secondary had not received is
//     lost: the simulator reads the old writer's data directory and lists
//     the rows it had that the new writer lacks (the audit), and keeps the
//     secondary's last rpo_lag_in_msec.
//
// N workers per pool (pool_max_conns N+1) run short write transactions
// (insert a row with a unique id into one table, each client its own range
// of ids, then ask aurora_db_instance_identifier(): which server answered,
// and committed, the transaction), one after the other, -think apart, each
// bounded by -request-timeout. The plain client is pgxpool with the retry
// loop an application writes by hand (a retry.Retrier classified by
// classify.Classify, a few attempts), made idempotent with ON CONFLICT DO
// NOTHING; the holdfast client is
// holdfast.New(holdfast.WithFailover(failover.Config{...})) (see
// failoverConfig) with every other default, its transactions through
// Factory.RunTx with a plain INSERT: the runner re-runs only what did not
// commit.
//
// It prints a progress line a second (elapsed time, the simulator's last
// step, holdfast's routing, requests that succeeded and failed per client,
// the writer and its Region), the timeline (the simulator's steps and the
// holdfast monitor's events, in ms from the switch: the writer refusing
// writes, or the Region going down), a table per client (requests, failed
// requests by SQLSTATE or error class, acknowledged, lost and misplaced
// writes, the writes the old primary acknowledged after the switch, the
// longest pause, the resume after the promotion), the audit of a failover
// (the rows lost, per client, and which of them were acknowledged), the
// goals and a legend. With -json it prints the same result as one JSON
// object (progress on stderr): its clients array has, for each client,
// name, requests, failed, max_pause_ms, resume_after_promotion_ms and
// writes_to_old_primary among its keys, and its operation object the
// operation, the Regions and writers before and after, the promotion and
// the DNS move (ms from the switch) and, for a failover, rpo_lag_ms and
// the lost rows. With -svg FILE it also draws the run into FILE (package
// examples/timeline): the requests that finished in each 100 ms per
// client, ok and failed apart, the operation's phases and steps, each
// client's longest pause.
//
// Measured with holdfast's routing across Regions (BENCHMARKS.md, the
// recordings in testdata): through a switchover plain pgxpool failed
// 2,310 of 2,852 writes (25006, every one from the switch on: it stays on
// the old primary, read-only) and never wrote to the new primary; holdfast
// failed none and wrote there 247 ms after it took writes, 5 s before the
// DNS moved. Through a failover (rpo lag 502 ms, 243 rows lost, all
// listed) holdfast resumed 134 ms after the promotion, plain pgxpool
// 10.2 s. Without failover.GlobalConfig.Regions (see failoverConfig) a
// pool on the global writer endpoint gets no failover routing (one Info
// line) and behaves as plain pgxpool there.
//
// Run it with: go run ./examples/global
// The failover: go run ./examples/global -op failover
package main

import (
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// The operations.
const (
	Switchover = "switchover"
	Failover   = "failover"
)

var ops = []string{Switchover, Failover}

// options are the command's flags.
type options struct {
	harness.Common // Name: the global cluster's
	Op             string
	Warmup         time.Duration // workload before the operation
	Settle         time.Duration // workload after it
	// Lag is how late the secondary Region receives the writer's WAL
	// (failovertest.GlobalConfig.Lag).
	Lag time.Duration
	// Detect and DNSLag are the operation's timings
	// (failovertest.GlobalScenario).
	Detect, DNSLag time.Duration
	TLS            bool          // TLS on every server, verify-full on the names
	RequestTimeout time.Duration // bounds each request, retries included
	SVG            string        // a file to draw the run into (package examples/timeline); "" for none
}

func defaultOptions() options {
	return options{
		Common: harness.Common{Workers: 4, Think: 10 * time.Millisecond, DNSTTL: failovertest.DefaultTTL,
			Name: failovertest.DefaultName},
		Op:             Switchover,
		Warmup:         2 * time.Second,
		Settle:         3 * time.Second,
		Lag:            failovertest.DefaultGlobalLag,
		Detect:         2 * time.Second,
		DNSLag:         5 * time.Second,
		TLS:            true,
		RequestTimeout: 15 * time.Second,
	}
}

// flags defines the command's flags into o and returns what checks them
// once parsed (package harness prints usage and errors).
func (o *options) flags(fs *harness.FlagSet) (check func() error) {
	fs.Common(&o.Common, "concurrent workers per pool", "pause between a worker's requests")
	fs.StringVar(&o.Op, "op", o.Op, "switchover (SwitchoverGlobalCluster, no data loss) | failover (FailoverGlobalCluster --allow-data-loss)")
	fs.DurationVar(&o.Lag, "lag", o.Lag, "how late the secondary Region receives what the writer writes")
	fs.DurationVar(&o.Detect, "detect", o.Detect, "failover: from the primary Region going down to the promotion")
	fs.DurationVar(&o.DNSLag, "dns-lag", o.DNSLag, "from the promotion to the global writer endpoint moving")
	fs.BoolVar(&o.TLS, "tls", o.TLS, "TLS on every server, the clients verifying the names (verify-full)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the operation")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the operation is done")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound of each request, retries included")
	fs.SVG(&o.SVG, "draw the run into this SVG `file`: requests per 100 ms per client, ok and failed, the operation's phases and steps, each client's longest pause")
	return func() error {
		if !slices.Contains(ops, o.Op) {
			return fs.Fail("unknown -op %q", o.Op)
		}
		if err := fs.Check(o.Common, "think", "warmup", "settle", "lag", "detect", "dns-lag", "dns-ttl"); err != nil {
			return err
		}
		return fs.Positive("request-timeout")
	}
}

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "global", Defaults: defaultOptions, Flags: (*options).flags, Run: run, Print: (*Result).print}

func main() { command.Exit() }
