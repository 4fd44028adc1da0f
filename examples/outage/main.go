// Command outage plays, on this machine and with real PostgreSQL servers,
// the outages of a database that publishes no topology, and runs the same
// write workload through a plain pgxpool and through a holdfast pool with
// every default, side by side.
//
// Three scenarios (-scenario):
//
//   - restart: one server restarted (pg_ctl stop -m fast, -down 5 s, then
//     pg_ctl start): its sessions get 57P01, new connections are refused
//     until it accepts again.
//   - multiaz: an RDS Multi-AZ DB instance's DNS-only failover (package
//     fakes/outagetest, MultiAZ), scaled to 20 s: the primary's address
//     goes silent (its packets dropped: a dial hangs), the standby, not
//     readable (57P03), is promoted -detect (5 s) later, and the
//     endpoint's DNS record moves to it -dns-lag (15 s) after that (RDS:
//     60 to 120 s in all); clients read it through a cache with -dns-ttl.
//   - demoted: a primary behind a DNS name demoted (outagetest.Pair): it
//     shuts down fast, the standby is promoted, the old primary comes back
//     as a read-only hot standby (writes fail with 25006) and the name
//     stays on it until -name-lag (5 s) after the promotion.
//
// N workers per pool (pool_max_conns 2N) run short write transactions
// (insert a row with a unique id into the client's own table). In restart
// and multiaz each worker starts one every -every (250 ms) whether or not
// its previous one ended, as a service's callers keep coming (the
// issue's trial: a request every 0.25 s): in multiaz the old primary's
// connections freeze, and a worker that waited would only wait there; in
// restart the requests that keep coming while the database is down are
// the demand that holdfast's prober paces its checks by (a worker that
// waits for its one request asks for nothing new: -every 0 runs them one
// after the other, -think apart, as in demoted). Each request is bounded by
// -request-timeout: by default the outage plus 1 s (see defaultTimeout),
// so that a client that rides through the outage fails nothing. The
// holdfast client is holdfast.New() with every default (no WithFailover:
// these shapes publish no topology; the outage layer, on by default,
// holds the requests while the database is down), its transactions
// through Factory.RunTx; the plain client is pgxpool with the same config
// and the retry loop an application writes by hand (a retry.Retrier
// classified by classify.Classify, a few attempts), made idempotent with
// ON CONFLICT DO NOTHING. Each pool dials through a counting dialer.
//
// It prints a progress line a second (elapsed time, the simulator's last
// step, requests that succeeded and failed per client, each pool's dials
// in that second), the timeline (the simulator's steps and holdfast's
// "database down" and "database back", in ms from the fault), and a table
// per client: requests, failed requests by SQLSTATE or error class,
// acknowledged and lost writes, the longest pause, the time to resume
// after the database is back, the connects while it was down, the
// requests that outlived their deadline, then the goals and a legend.
// With -json it prints the same result as one JSON object (progress on
// stderr); its clients array has, for each client, name, requests,
// failed, max_pause_ms, resume_after_back_ms and connects_while_down
// among its keys. With -svg FILE it also draws the run into FILE (package
// examples/timeline): the requests that finished in each 100 ms per
// client, ok and failed apart, the outage shaded, each client's longest
// pause.
//
// Run it with: go run ./examples/outage
// Other scenarios: -scenario multiaz | demoted.
package main

import (
	"flag"
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/outagetest"
)

// The scenarios.
const (
	Restart = "restart"
	MultiAZ = "multiaz"
	Demoted = "demoted"
)

var scenarios = []string{Restart, MultiAZ, Demoted}

// options are the command's flags.
type options struct {
	harness.Common
	Scenario string
	Warmup   time.Duration // workload before the fault
	Settle   time.Duration // workload after the database is back
	// Down is how long a restart's server stays stopped (restart).
	Down time.Duration
	// Detect and DNSLag are the Multi-AZ failover's timings
	// (outagetest.FailoverScenario).
	Detect, DNSLag time.Duration
	// NameLag is the time from the promotion to the name moving (demoted).
	NameLag time.Duration
	// RequestTimeout bounds each request, retries included; 0: the
	// scenario's default (defaultTimeout).
	RequestTimeout time.Duration
	// Every, when set, makes each worker start a request every Every,
	// whether or not its previous one ended (harness.Config.Every), instead
	// of one after the other, Think apart.
	Every time.Duration
	SVG   string // a file to draw the run into (package examples/timeline); "" for none
}

func defaultOptions() options {
	f, d := outagetest.DemoFailover(), outagetest.DemoDemote()
	return options{
		Common:   harness.Common{Workers: 4, Think: 10 * time.Millisecond, DNSTTL: 200 * time.Millisecond},
		Scenario: Restart,
		Warmup:   2 * time.Second,
		Settle:   3 * time.Second,
		Down:     5 * time.Second,
		Detect:   f.Detect,
		DNSLag:   f.DNSLag,
		NameLag:  d.NameLag,
	}
}

// defaultEvery is the scenario's pace of each worker: 250 ms for restart
// and multiaz, 0 (one request after the other) for demoted. A Multi-AZ
// failover freezes the connections to the silent primary: a worker that
// waits for its request waits for its deadline there, while a service's
// callers keep coming; those need new connections, which the outage
// layer holds. In a restart the requests that keep coming are the demand
// the outage layer's prober paces its checks by.
func defaultEvery(scenario string) time.Duration {
	if scenario == MultiAZ || scenario == Restart {
		return 250 * time.Millisecond
	}
	return 0
}

// defaultTimeout is the scenario's request bound: the outage plus 1 s, so
// that every request started during it can end after the database is
// back. The outage is, for a restart, Down and pg_ctl's start (under 1 s
// here); for a Multi-AZ failover, Detect, DNSLag and the client's DNS TTL;
// for a demote, the demote itself (up to 3.5 s here), NameLag and the TTL.
func (o options) defaultTimeout() time.Duration {
	switch o.Scenario {
	case MultiAZ:
		return o.Detect + o.DNSLag + o.DNSTTL + time.Second
	case Demoted:
		return 4*time.Second + o.NameLag + o.DNSTTL + time.Second
	}
	return o.Down + 2*time.Second
}

// timeout is the request bound of the run.
func (o options) timeout() time.Duration {
	if o.RequestTimeout > 0 {
		return o.RequestTimeout
	}
	return o.defaultTimeout()
}

// flags defines the command's flags into o and returns what checks them
// once parsed (package harness prints usage and errors).
func (o *options) flags(fs *harness.FlagSet) (check func() error) {
	fs.Common(&o.Common, "concurrent workers per pool", "pause between a worker's requests")
	fs.StringVar(&o.Scenario, "scenario", o.Scenario, "restart (5 s) | multiaz (DNS-only failover, 20 s) | demoted (a primary demoted behind its name)")
	fs.DurationVar(&o.Down, "down", o.Down, "restart: how long the server stays stopped")
	fs.DurationVar(&o.Detect, "detect", o.Detect, "multiaz: from the primary going silent to the standby's promotion")
	fs.DurationVar(&o.DNSLag, "dns-lag", o.DNSLag, "multiaz: from the promotion to the endpoint's DNS record moving")
	fs.DurationVar(&o.NameLag, "name-lag", o.NameLag, "demoted: from the promotion to the name moving to the new primary")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the fault")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the database is back")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", 0, "bound of each request, retries included (0: the outage plus 1 s)")
	fs.DurationVar(&o.Every, "every", 0, "each worker starts a request every this long, whether or not its previous one ended (0: one after the other, -think apart; by default 250ms for restart and multiaz, 0 for demoted)")
	fs.SVG(&o.SVG, "draw the run into this SVG `file`: requests per 100 ms per client, ok and failed, the outage, each client's longest pause")
	return func() error {
		if !slices.Contains(scenarios, o.Scenario) {
			return fs.Fail("unknown -scenario %q", o.Scenario)
		}
		every := false
		fs.Visit(func(f *flag.Flag) { every = every || f.Name == "every" })
		if !every {
			o.Every = defaultEvery(o.Scenario)
		}
		return fs.Check(o.Common, "think", "warmup", "settle", "down", "detect", "dns-lag", "name-lag", "dns-ttl", "request-timeout", "every")
	}
}

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "outage", Defaults: defaultOptions, Flags: (*options).flags, Run: run, Print: (*Result).print}

func main() { command.Exit() }
