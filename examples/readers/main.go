// Command readers plays the life of an Aurora cluster's readers on this
// machine and runs the same read workload through a plain pgxpool and
// through a holdfast pool, both on the reader endpoint, side by side.
//
// It starts a simulated Aurora cluster (package fakes/failovertest): a
// writer and -readers readers, real PostgreSQL servers kept in step by
// physical replication, with RDS's names in a fake DNS. Like Aurora's, the
// reader endpoint answers each lookup with one reader at random, and the
// clients read it through a cache with a TTL (-dns-ttl, 5 s as Aurora
// publishes). Each client has a pool of -pool connections (MinConns =
// MaxConns, so they open at the start) under its own login role, so that
// the simulator counts each client's connections per reader
// (pg_stat_activity); -workers workers per client run a read that returns
// the server that answered it (SELECT aurora_db_instance_identifier()),
// each tried once, bounded by -request-timeout, ok or failed.
//
// The phases, one run, both clients on the same cluster at once:
//
//   - steady (-steady): the connections per reader, sampled every 250 ms;
//     its figure is the largest max/min over the readers of any sample.
//   - add: a reader joins (Cluster.AddReader: the topology and the reader
//     endpoint list it); -join-wait (10 s) later, its connections of each
//     client ÷ its fair share (the client's reader connections ÷ the
//     readers).
//   - crash: a reader dies (pg_ctl stop -m immediate), the one with most of
//     the plain pool's connections; it stays in the topology and behind
//     the reader endpoint, as on Aurora until the failure is detected. Per
//     client: the failed reads, those that started after the crash
//     (beyond the reads in flight), and the time from the crash until
//     every worker reads again (-crash-for of workload before the next
//     phase; the figures count to the end of the run).
//   - lag: another reader, the one that served most of holdfast's reads
//     since the crash, lags -lag (the topology's replica_lag_in_msec
//     and a real recovery_min_apply_delay). holdfast runs with
//     Readers.MaxLag -max-lag and RefreshInterval -refresh (1 s here, so
//     that "MaxLag + one topology refresh" is short; the default while a
//     reader pool is open is Readers.RefreshInterval, 5 s):
//     the reads served by the lagging reader that started after MaxLag +
//     one refresh from the lag (-lag-for of workload).
//
// The holdfast client is holdfast.New(holdfast.WithFailover(failover.Config{
// RefreshInterval: -refresh, Readers: failover.ReaderConfig{MaxLag:
// -max-lag}})) and Factory.NewPool: each new connection by the reader
// endpoint dials the reader of the monitor's topology with the fewest of
// the pool's connections, a reader that joins gets its share (the busiest
// readers' surplus connections are retired), a reader lagging beyond
// MaxLag gets no new connection and the pool's connections to it are
// retired. The plain client is pgxpool with the same
// config: its connections go where the cached DNS answer says.
//
// It prints a progress line per second (phase, reads ok and failed per
// client in that second, connections per reader per client), the
// connections and reads per reader at the end of each phase, a table
// (rows: requests, failed, reader connections max/min, new reader share,
// resume after crash, lagging reads; columns pgxpool, holdfast), the goals
// and a legend. With -json it prints one JSON object on stdout instead (its
// clients array: name, requests, failed, reader_connections_max_min,
// new_reader_share, resume_after_crash_ms, lagging_reads, and more; the
// phases and the samples too); progress goes to stderr.
//
// Run it with: go run ./examples/readers (about 40 s: the cluster's start
// and the added reader's pg_basebackup take a few seconds each); -json for
// the JSON object; -v for holdfast's logs on stderr. It needs only Go and
// the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup on PATH or
// in a usual place).
package main

import (
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// options are the command's flags.
type options struct {
	harness.Common               // Name: the cluster's; Workers: read workers per client
	Readers        int           // readers at the start
	Pool           int           // connections per pool (MinConns = MaxConns)
	Steady         time.Duration // the steady phase
	JoinWait       time.Duration // from the added reader joining to its share's measure
	CrashFor       time.Duration // workload after the crash
	Lag            time.Duration // the lagging reader's lag
	MaxLag         time.Duration // holdfast's Readers.MaxLag
	LagFor         time.Duration // workload after MaxLag + one refresh from the lag
	Refresh        time.Duration // holdfast's RefreshInterval
	RequestTimeout time.Duration // bounds each read
	Sample         time.Duration // connection sampling interval
	Seed           uint64        // the reader endpoint's random answers (0: random)
}

func defaultOptions() options {
	return options{
		Common: harness.Common{Workers: 4, Think: 10 * time.Millisecond, DNSTTL: failovertest.DefaultTTL,
			Name: failovertest.DefaultName},
		Readers:        3,
		Pool:           12,
		Steady:         5 * time.Second,
		JoinWait:       10 * time.Second,
		CrashFor:       5 * time.Second,
		Lag:            3 * time.Second,
		MaxLag:         time.Second,
		LagFor:         5 * time.Second,
		Refresh:        time.Second,
		RequestTimeout: 2 * time.Second,
		Sample:         250 * time.Millisecond,
	}
}

// flags defines the command's flags into o and returns what checks them
// once parsed (package harness prints usage and errors).
func (o *options) flags(fs *harness.FlagSet) (check func() error) {
	fs.Common(&o.Common, "read workers per client", "pause between a worker's reads")
	fs.IntVar(&o.Readers, "readers", o.Readers, "readers at the start (one more joins mid-run)")
	fs.IntVar(&o.Pool, "pool", o.Pool, "connections per pool (MinConns = MaxConns); a multiple of -readers and -readers+1 makes an even spread possible")
	fs.DurationVar(&o.Steady, "steady", o.Steady, "the steady phase")
	fs.DurationVar(&o.JoinWait, "join-wait", o.JoinWait, "from the added reader joining to the measure of its share")
	fs.DurationVar(&o.CrashFor, "crash-for", o.CrashFor, "workload after a reader crashes")
	fs.DurationVar(&o.Lag, "lag", o.Lag, "the lag spike of one reader")
	fs.DurationVar(&o.MaxLag, "max-lag", o.MaxLag, "holdfast's failover.ReaderConfig.MaxLag")
	fs.DurationVar(&o.LagFor, "lag-for", o.LagFor, "workload after MaxLag + one refresh from the lag spike")
	fs.DurationVar(&o.Refresh, "refresh", o.Refresh, "holdfast's failover.Config.RefreshInterval (default there: 30 s, and 5 s while a reader pool is open)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound of each read")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the reader endpoint's random answers (0: random)")
	return func() error {
		if fs.NArg() > 0 {
			return fs.Fail("unexpected arguments %q", fs.Args())
		}
		switch {
		case o.Readers < 2 || o.Readers >= failovertest.MaxReplicas:
			return fs.Fail("-readers %d: want 2 to %d (one crashes, one lags, one joins)", o.Readers, failovertest.MaxReplicas-1)
		case o.Pool < o.Readers+1:
			return fs.Fail("-pool %d: want at least -readers + 1 (%d)", o.Pool, o.Readers+1)
		}
		if err := fs.Check(o.Common, "think", "steady", "join-wait", "crash-for", "lag", "max-lag", "lag-for", "dns-ttl"); err != nil {
			return err
		}
		if o.Refresh <= 0 || o.RequestTimeout <= 0 {
			return fs.Fail("-refresh %v, -request-timeout %v: must be positive", o.Refresh, o.RequestTimeout)
		}
		if o.MaxLag == 0 || o.Lag <= o.MaxLag {
			return fs.Fail("-lag %v, -max-lag %v: want 0 < max-lag < lag", o.Lag, o.MaxLag)
		}
		return nil
	}
}

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "readers", Defaults: defaultOptions, Flags: (*options).flags, Run: run, Print: (*Result).print}

func main() { command.Exit() }
