// Command cloudsql runs holdfast through the Cloud SQL Go connector
// (cloud.google.com/go/cloudsqlconn).
//
// Without INSTANCE_CONNECTION_NAME it is a demo: the same write workload
// through a plain pgxpool and through a holdfast pool, each with a real
// cloudsqlconn dialer of its own, against the fake Cloud SQL of
// fakes/cloudsqltest (a real PostgreSQL behind it) while it plays a
// scenario:
//
//	go run ./examples/cloudsql -scenario maintenance -json
//
//	token503      the IAM login token endpoint answers 503 to each
//	              dialer's first fetch (the incident holdfast was built for)
//	maintenance   an Enterprise Plus maintenance: connections cut, new ones
//	              refused for -cut (300 ms), the same server after
//	ha-failover   an HA failover: the same IP, connections cut, refusals for
//	              -downtime (3 s) while the standby takes the regional disk
//	              over (a crash and restart of the PostgreSQL: every
//	              committed row kept)
//	dr-switchover an advanced DR switchover: the pools dial the write
//	              endpoint (cloudsqlconn.WithDNSResolver, WithFailoverPeriod
//	              -failover-period); the primary is demoted, the DR replica
//	              promoted, then the name moves
//
// The plain client runs each transaction once (with -plain-retry, it
// retries it by hand, as a careful application does: it is idempotent);
// holdfast's runs through Factory.RunTx. It prints a
// progress line a second, then a table, or with -json one object whose
// "clients" hold, per client: name, requests, failed, max_pause_ms (the
// longest time without an acknowledged write), resume_after_ms (from the
// instance accepting again, or the write endpoint moving, to the first
// write acknowledged after it), and the writes' fate. -svg FILE draws the
// run.
//
// With INSTANCE_CONNECTION_NAME, DB_USER and DB_NAME set it connects to
// that instance instead, with IAM database authentication, and prints the
// user it logged in as:
//
//	INSTANCE_CONNECTION_NAME=my-project:europe-west1:my-instance \
//	DB_USER=app@my-project.iam DB_NAME=app go run ./examples/cloudsql
//
// That needs Application Default Credentials for a principal with the
// Cloud SQL Client and Cloud SQL Instance User roles, and that principal
// as an IAM database user (for a service account, its e-mail without
// ".gserviceaccount.com").
package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
)

// Scenarios are the -scenario values.
var scenarios = []string{"token503", "maintenance", "ha-failover", "dr-switchover"}

type options struct {
	harness.Common
	Scenario       string
	Warmup, Settle time.Duration
	Cut            time.Duration // maintenance
	Downtime       time.Duration // ha-failover
	FailoverPeriod time.Duration // dr-switchover
	RequestTimeout time.Duration
	PlainRetry     bool
	SVG            string
}

func defaultOptions() options {
	return options{
		Common:         harness.Common{Workers: 4, Think: 20 * time.Millisecond},
		Scenario:       "maintenance",
		Warmup:         2 * time.Second,
		Settle:         3 * time.Second,
		Cut:            300 * time.Millisecond,
		Downtime:       3 * time.Second,
		FailoverPeriod: 500 * time.Millisecond,
		RequestTimeout: 10 * time.Second,
	}
}

var command = harness.Command[options, *Result]{
	Name:     "cloudsql",
	Defaults: defaultOptions,
	Flags: func(o *options, fs *harness.FlagSet) func() error {
		fs.Common(&o.Common, "workers per client", "pause between a worker's requests")
		fs.StringVar(&o.Scenario, "scenario", o.Scenario, "what the fake Cloud SQL plays: "+strings.Join(scenarios, ", "))
		fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the scenario")
		fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the scenario")
		fs.DurationVar(&o.Cut, "cut", o.Cut, "maintenance: how long new connections are refused")
		fs.DurationVar(&o.Downtime, "downtime", o.Downtime, "ha-failover: how long new connections are refused")
		fs.DurationVar(&o.FailoverPeriod, "failover-period", o.FailoverPeriod, "dr-switchover: the connector's check of the write endpoint (cloudsqlconn.WithFailoverPeriod)")
		fs.DurationVar(&o.RequestTimeout, "timeout", o.RequestTimeout, "bound of each request")
		fs.BoolVar(&o.PlainRetry, "plain-retry", false, "the plain client retries its idempotent transaction by hand (6 attempts from 50 ms), as a careful application does")
		fs.SVG(&o.SVG, "draw the run into this SVG file")
		return func() error {
			if !slices.Contains(scenarios, o.Scenario) {
				return fs.Fail("-scenario %q: want one of %s", o.Scenario, strings.Join(scenarios, ", "))
			}
			return fs.Check(o.Common, "warmup", "settle", "cut", "downtime", "failover-period", "timeout")
		}
	},
	Run:   run,
	Print: func(res *Result, w io.Writer) { res.print(w) },
}

func main() {
	if os.Getenv("INSTANCE_CONNECTION_NAME") != "" {
		realMain()
		return
	}
	command.Exit()
}
