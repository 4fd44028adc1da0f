package bluegreentest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	fake "github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestDefaultTimings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scenario fake.Scenario
		blueDNS  time.Duration
		greenDNS time.Duration
	}{
		{fake.ScenarioNormal, 3 * time.Second, 3500 * time.Millisecond},
		{fake.ScenarioSlowDNS, 20 * time.Second, 20500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(string(tt.scenario), func(t *testing.T) {
			got := fake.DefaultTimings(tt.scenario)
			if got.BlueDNS != tt.blueDNS || got.GreenDNS != tt.greenDNS {
				t.Errorf("BlueDNS %v, GreenDNS %v; want %v, %v", got.BlueDNS, got.GreenDNS, tt.blueDNS, tt.greenDNS)
			}
			if got.Preparation != 3*time.Second || got.InProgress != 2*time.Second || got.Completed != 4*time.Second {
				t.Errorf("timings %+v", got)
			}
		})
	}
}

// replicationEnv starts servers with logical replication, shared by the
// subtests of t.
func replicationEnv(t *testing.T) *fake.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := fake.Start(ctx, fake.Config{Settings: fake.ReplicationSettings()})
	if errors.Is(err, fake.ErrNotFound) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Error(err)
		}
	})
	return env
}

const itemsDDL = `CREATE TABLE IF NOT EXISTS public.items (id bigint PRIMARY KEY);`

// appConn connects as role "app" to the deployment's database through
// host name host and the Env's resolver.
func appConn(ctx context.Context, d *fake.Deployment, host string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(d.DSN(host))
	if err != nil {
		return nil, err
	}
	cfg.User = "app"
	cfg.LookupFunc = d.Env.Resolver.Lookup
	cfg.DialFunc = d.Env.Dial
	return pgx.ConnectConfig(ctx, cfg)
}

// insert writes id as role "app" through host and returns the error.
func insert(ctx context.Context, d *fake.Deployment, host string, id int) error {
	c, err := appConn(ctx, d, host)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "INSERT INTO public.items VALUES ($1)", id)
	return err
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

func has(ctx context.Context, t *testing.T, s *fake.Server, db string, id int) bool {
	t.Helper()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var ok bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM public.items WHERE id = $1)", id).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestSwitchover plays the scenarios on real servers and checks what a
// client sees at each step: terminated sessions and refused connects
// during IN_PROGRESS, writes replicated to green, green writable and old
// blue read-only after the switch, blue writable again after a rollback,
// the metadata and DNS at the end.
func TestSwitchover(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a switchover on real servers: skipped with -short")
	}
	env := replicationEnv(t)
	small := fake.Timings{Preparation: 100 * time.Millisecond, InProgress: 600 * time.Millisecond,
		Rename: 50 * time.Millisecond, BlueDNS: 100 * time.Millisecond, Completed: 150 * time.Millisecond, Empty: 50 * time.Millisecond}
	tests := []struct {
		scenario  fake.Scenario
		switched  bool
		status    string // metadata status at the end
		blueDNS   bool   // blue names resolve to green at the end
		events    []string
		notEvents []string
	}{
		{scenario: fake.ScenarioNormal, switched: true, status: "", blueDNS: true,
			events: []string{fake.StatusInProgress, fake.ScriptGreenCaughtUp, fake.ScriptGreenWritable, fake.StatusPostProcessing,
				fake.ScriptRenamed, fake.ScriptBlueDNSUpdated, fake.ScriptGreenDNSGone, fake.StatusCompleted, fake.ScriptMetadataEmpty}},
		{scenario: fake.ScenarioRollback, status: fake.StatusAvailable,
			events:    []string{fake.StatusInProgress, fake.ScriptRolledBack},
			notEvents: []string{fake.ScriptGreenWritable, fake.StatusPostProcessing}},
		{scenario: fake.ScenarioStuck, switched: true, status: fake.StatusInProgress, blueDNS: true,
			events:    []string{fake.ScriptGreenWritable, fake.ScriptBlueDNSUpdated},
			notEvents: []string{fake.StatusPostProcessing, fake.StatusCompleted}},
		{scenario: fake.ScenarioDNSBeforePost, switched: true, status: "", blueDNS: true,
			events: []string{fake.ScriptBlueDNSUpdated, fake.StatusPostProcessing}},
	}
	for i, tt := range tests {
		t.Run(string(tt.scenario), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d, err := env.NewDeployment(ctx, fake.DeploymentConfig{})
			if err != nil {
				t.Fatal(err)
			}
			repl, err := d.Replicate(ctx, itemsDDL, "public.items")
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := repl.Stop(ctx); err != nil {
					t.Error(err)
				}
				if err := d.Drop(ctx); err != nil {
					t.Error(err)
				}
			}()
			if err := d.CreateRole(ctx, "app"); err != nil {
				t.Fatal(err)
			}
			host := d.Names.Cluster
			base := (i + 1) * 1000
			if err := insert(ctx, d, host, base+1); err != nil {
				t.Fatalf("write to blue before the switchover: %v", err)
			}
			if code := sqlstate(insert(ctx, d, d.Names.GreenCluster, base+2)); code != "25006" {
				t.Errorf("write to green before the switchover: %q, want 25006", code)
			}
			open, err := appConn(ctx, d, host) // a session on blue, to be terminated
			if err != nil {
				t.Fatal(err)
			}
			defer open.Close(context.Background())

			var mu sync.Mutex
			var during []string // what a client saw during IN_PROGRESS
			res, err := d.Switchover(ctx, fake.SwitchoverConfig{Scenario: tt.scenario, Timings: small, Replication: repl,
				OnEvent: func(e fake.ScriptEvent) {
					if e.Name != fake.ScriptBlueReadOnly {
						return
					}
					_, qerr := open.Exec(ctx, "SELECT 1")
					c, cerr := appConn(ctx, d, d.Env.Blue.Host)
					if c != nil {
						c.Close(context.Background())
					}
					mu.Lock()
					during = []string{sqlstate(qerr), sqlstate(cerr)}
					mu.Unlock()
				}})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			if len(during) != 2 || during[0] != "57P01" || during[1] != "53300" {
				t.Errorf("during IN_PROGRESS: open session %q, new connection %q; want 57P01, 53300", during[0], during[1])
			}
			mu.Unlock()
			if res.Switched != tt.switched {
				t.Errorf("Switched = %v, want %v", res.Switched, tt.switched)
			}
			for _, name := range tt.events {
				if _, ok := res.At(name); !ok {
					t.Errorf("no %q event in %+v", name, res.Events)
				}
			}
			for _, name := range tt.notEvents {
				if _, ok := res.At(name); ok {
					t.Errorf("unexpected %q event", name)
				}
			}
			if got := d.Status(); got != tt.status {
				t.Errorf("metadata status %q, want %q", got, tt.status)
			}
			addrs, _ := env.Resolver.Lookup(ctx, host)
			wantAddr := env.Blue.Host
			if tt.blueDNS {
				wantAddr = env.Green.Host
			}
			if len(addrs) != 1 || addrs[0] != wantAddr {
				t.Errorf("%s resolves to %v, want %s", host, addrs, wantAddr)
			}

			if tt.switched {
				if !has(ctx, t, env.Green, d.Database, base+1) {
					t.Error("a write blue took before the switchover is missing on green")
				}
				if err := insert(ctx, d, env.Green.Host, base+3); err != nil {
					t.Errorf("write to green after the switchover: %v", err)
				}
				if code := sqlstate(insert(ctx, d, env.Blue.Host, base+4)); code != "25006" {
					t.Errorf("write to old blue after the switchover: %q, want 25006", code)
				}
				if has(ctx, t, env.Blue, d.Database, base+3) {
					t.Error("a write to green after the switchover was replicated back to blue")
				}
			} else {
				if err := insert(ctx, d, env.Blue.Host, base+3); err != nil {
					t.Errorf("write to blue after the rollback: %v", err)
				}
				if code := sqlstate(insert(ctx, d, env.Green.Host, base+4)); code != "25006" {
					t.Errorf("write to green after the rollback: %q, want 25006", code)
				}
				if err := repl.CatchUp(ctx); err != nil {
					t.Fatal(err)
				}
				if !has(ctx, t, env.Green, d.Database, base+3) {
					t.Error("after the rollback, replication to green stopped")
				}
			}
			if tt.scenario == fake.ScenarioNormal {
				if _, err := env.Resolver.Lookup(ctx, d.Names.GreenCluster); err == nil {
					t.Error("green name still resolves")
				}
				var de *net.DNSError
				if addrs, err := env.Resolver.Lookup(ctx, d.Names.OldCluster); errors.As(err, &de) || len(addrs) != 1 || addrs[0] != env.Blue.Host {
					t.Errorf("old name resolves to %v, %v; want the blue server", addrs, err)
				}
			}
		})
	}
}

func TestSwitchoverUnknownScenario(t *testing.T) {
	t.Parallel()
	var d fake.Deployment
	if _, err := d.Switchover(context.Background(), fake.SwitchoverConfig{Scenario: "nope"}); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}
