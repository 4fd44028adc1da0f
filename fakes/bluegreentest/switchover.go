package bluegreentest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/internal/pause"
)

// Scenario is a switchover script for [Deployment.Switchover].
type Scenario string

// The scenarios. Each follows the real Aurora timeline, scaled down by
// [Timings]; they differ where real switchovers have been seen to differ.
const (
	// ScenarioNormal: SWITCHOVER_INITIATED, SWITCHOVER_IN_PROGRESS (blue
	// stops taking writes, its sessions are terminated, green catches up
	// and is made writable), SWITCHOVER_IN_POST_PROCESSING (names swap in
	// the metadata, then in DNS), SWITCHOVER_COMPLETED (the SOURCE rows
	// disappear), then the metadata empties.
	ScenarioNormal Scenario = "normal"
	// ScenarioRollback: halfway through IN_PROGRESS, before green is made
	// writable, the switchover is rolled back: blue takes writes again and
	// the metadata returns to AVAILABLE.
	ScenarioRollback Scenario = "rollback"
	// ScenarioDNSBeforePost: the blue names point at green once green is
	// writable, halfway through IN_PROGRESS, before POST.
	ScenarioDNSBeforePost Scenario = "dns-before-post"
	// ScenarioStuck: the switchover happens (green writable, DNS swapped)
	// but the metadata stays at SWITCHOVER_IN_PROGRESS.
	ScenarioStuck Scenario = "stuck"
	// ScenarioSlowDNS: the blue names keep pointing at the old blue instance
	// for tens of seconds after POST (Timings.BlueDNS defaults to 20 s), past
	// COMPLETED.
	ScenarioSlowDNS Scenario = "slow-dns"
	// ScenarioFrozenBlue: as normal, but old blue's metadata stays at
	// SWITCHOVER_IN_PROGRESS while green's goes on (renamed in POST, then
	// COMPLETED): a case seen on real deployments. A client that reads the
	// old blue server after POST sees an earlier phase.
	ScenarioFrozenBlue Scenario = "frozen-blue"
	// ScenarioFrozenBluePost: as ScenarioFrozenBlue, frozen at
	// SWITCHOVER_IN_POST_PROCESSING (before the names swap).
	ScenarioFrozenBluePost Scenario = "frozen-blue-post"
	// ScenarioIAM: as normal, on an Env with Config.IAM, where a token
	// must be signed for a name the server answers to: green answers to
	// the green names until the rename (Timings.Rename into POST), then to
	// the blue names. A client that signs every token for the name it
	// connects by fails with 28000 when a blue name leads to green before
	// the rename (and when it leads to old blue after it).
	ScenarioIAM Scenario = "iam"
	// ScenarioNodeCerts: as normal, on an Env with Config.NodeCerts, where
	// each server presents a certificate for its own names, and the
	// certificates are renewed late: Timings.Certificates defaults to past
	// SWITCHOVER_COMPLETED. Until then green's certificate carries only the
	// green names, so sslmode=verify-full by a blue name fails against
	// green, through POST and after COMPLETED.
	ScenarioNodeCerts Scenario = "node-certs"
)

// Scenarios lists every scenario.
func Scenarios() []Scenario {
	return []Scenario{ScenarioNormal, ScenarioRollback, ScenarioDNSBeforePost, ScenarioStuck, ScenarioSlowDNS,
		ScenarioFrozenBlue, ScenarioFrozenBluePost, ScenarioIAM, ScenarioNodeCerts}
}

// Timings of a switchover script. Zero fields take the defaults: the
// timeline of a real Aurora switchover (POST 2.5–4 s after IN_PROGRESS, DNS
// updates and COMPLETED 30–65 s after it) scaled down so that a whole
// switchover takes about 12 s.
type Timings struct {
	// Preparation is how long SWITCHOVER_INITIATED lasts. Default 3 s.
	Preparation time.Duration
	// InProgress is how long SWITCHOVER_IN_PROGRESS lasts (longer when green
	// takes longer to catch up). Default 2 s. A rollback happens halfway.
	InProgress time.Duration
	// Rename is when, after POST, the metadata gives green the blue names
	// and old blue the -old1 names. Default 1 s.
	Rename time.Duration
	// BlueDNS is when, after POST, the blue names start resolving to green
	// (and the -old1 names to old blue). Default 3 s; 20 s in
	// ScenarioSlowDNS.
	BlueDNS time.Duration
	// GreenDNS is when, after POST, the green names stop resolving. Default
	// BlueDNS + 500 ms.
	GreenDNS time.Duration
	// Completed is when, after POST, the status becomes
	// SWITCHOVER_COMPLETED and the SOURCE rows disappear. Default 4 s.
	Completed time.Duration
	// Empty is when, after COMPLETED and the DNS changes, the metadata
	// empties. Default 2 s.
	Empty time.Duration
	// Certificates is when, after the rename, the servers' certificates are
	// renewed for their new names ([Deployment.RenewCertificates]), on an
	// Env with Config.NodeCerts (elsewhere the step is not played).
	// Default 500 ms; in ScenarioNodeCerts, 2 s after COMPLETED.
	Certificates time.Duration
}

// DefaultTimings returns the defaults of scenario's Timings.
func DefaultTimings(scenario Scenario) Timings {
	return Timings{}.withDefaults(scenario)
}

func (t Timings) withDefaults(s Scenario) Timings {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Preparation, 3*time.Second)
	def(&t.InProgress, 2*time.Second)
	def(&t.Rename, time.Second)
	if s == ScenarioSlowDNS {
		def(&t.BlueDNS, 20*time.Second)
	}
	def(&t.BlueDNS, 3*time.Second)
	def(&t.GreenDNS, t.BlueDNS+500*time.Millisecond)
	def(&t.Completed, 4*time.Second)
	def(&t.Empty, 2*time.Second)
	if s == ScenarioNodeCerts {
		def(&t.Certificates, max(t.Completed-t.Rename, 0)+2*time.Second)
	}
	def(&t.Certificates, 500*time.Millisecond)
	return t
}

// Script event names ([ScriptEvent].Name), besides the statuses written
// (StatusInitiated and so on).
const (
	ScriptBlueReadOnly   = "blue read-only, sessions terminated" // IN_PROGRESS: blue refuses new connections and writes
	ScriptGreenCaughtUp  = "green caught up"                     // replication has applied every write blue took
	ScriptGreenWritable  = "green writable"                      // green promoted
	ScriptBlueReopened   = "old blue accepts connections"        // read-only, as the -old1 instance
	ScriptRenamed        = "metadata renamed"                    // green carries the blue names in the metadata
	ScriptCertsRenewed   = "certificates renewed"                // the servers' certificates carry their new names
	ScriptBlueDNSUpdated = "blue DNS updated"                    // blue names resolve to green
	ScriptGreenDNSGone   = "green DNS removed"                   // green names no longer resolve
	ScriptSourceDropped  = "SOURCE rows removed"                 // with COMPLETED
	ScriptMetadataEmpty  = "metadata empty"                      // the end of the deployment
	ScriptRolledBack     = "rolled back"                         // blue writable again, status AVAILABLE

	ScriptBlueMetadataFrozen = "blue metadata frozen" // ScenarioFrozenBlue(Post): blue's metadata stops changing
)

// ScriptEvent is one step of a switchover script, when it was done.
type ScriptEvent struct {
	Time time.Time `json:"time"`
	Name string    `json:"event"`
}

// SwitchoverConfig configures [Deployment.Switchover].
type SwitchoverConfig struct {
	// Scenario to play. Default ScenarioNormal.
	Scenario Scenario
	// Timings of the script; zero fields take the defaults.
	Timings Timings
	// Replication, when set, is caught up and promoted during IN_PROGRESS;
	// without it green is only made writable.
	Replication *Replication
	// OnEvent, when set, is called after each step, on the goroutine running
	// Switchover; it must not block.
	OnEvent func(ScriptEvent)
}

// SwitchoverResult describes a switchover that was played.
type SwitchoverResult struct {
	Scenario Scenario      `json:"scenario"`
	Timings  Timings       `json:"-"`
	Events   []ScriptEvent `json:"events"`
	// Switched is true when green took over (every scenario but
	// ScenarioRollback): green is the primary afterwards, and old blue is
	// read-only. After a rollback blue is still the primary.
	Switched bool `json:"switched"`
}

// At returns when the event named name happened.
func (r SwitchoverResult) At(name string) (time.Time, bool) {
	for _, e := range r.Events {
		if e.Name == name {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// Switchover plays a blue/green switchover on the deployment, as RDS does
// it, and returns when the script is done (about 12 s with the default
// timings) or ctx ends. It blocks; run it on a goroutine of your own to
// drive a workload meanwhile. It owns no goroutines.
//
// The deployment should be at AVAILABLE (CREATED) for a while before, so
// that clients have seen it (Switchover writes AVAILABLE first when the
// metadata is empty). Blue stops taking writes at SWITCHOVER_IN_PROGRESS:
// its database gets default_transaction_read_only and a connection limit
// of 0 (new connections by non-superusers fail with SQLSTATE 53300), and its
// client sessions are terminated (57P01). With cfg.Replication green then
// catches up and is promoted. At POST old blue accepts connections again,
// read-only (writes fail with 25006), as the -old1 instance does. Clients
// must connect as a non-superuser ([Deployment.CreateRole]) to be refused.
//
// The Env's servers are shared by every deployment, so only the
// deployment's database is changed, never server-wide settings.
func (d *Deployment) Switchover(ctx context.Context, cfg SwitchoverConfig) (SwitchoverResult, error) {
	if cfg.Scenario == "" {
		cfg.Scenario = ScenarioNormal
	}
	if !slices.Contains(Scenarios(), cfg.Scenario) {
		return SwitchoverResult{}, fmt.Errorf("fakes/bluegreentest: unknown scenario %q", cfg.Scenario)
	}
	switch ec := d.Env.cfg; {
	case cfg.Scenario == ScenarioIAM && !ec.IAM:
		return SwitchoverResult{}, fmt.Errorf("fakes/bluegreentest: scenario %q needs an Env with Config.IAM", cfg.Scenario)
	case cfg.Scenario == ScenarioNodeCerts && !ec.NodeCerts:
		return SwitchoverResult{}, fmt.Errorf("fakes/bluegreentest: scenario %q needs an Env with Config.NodeCerts", cfg.Scenario)
	}
	t := cfg.Timings.withDefaults(cfg.Scenario)
	s := &script{d: d, cfg: cfg, res: SwitchoverResult{Scenario: cfg.Scenario, Timings: t}}
	err := s.run(ctx, t)
	if err != nil {
		err = fmt.Errorf("fakes/bluegreentest: switchover (%s): %w", cfg.Scenario, err)
	}
	return s.res, err
}

type script struct {
	d   *Deployment
	cfg SwitchoverConfig
	res SwitchoverResult
}

func (s *script) event(name string) {
	e := ScriptEvent{Time: time.Now(), Name: name}
	s.res.Events = append(s.res.Events, e)
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}

func (s *script) status(ctx context.Context, status string) error {
	if err := s.d.SetStatus(ctx, status); err != nil {
		return err
	}
	s.event(status)
	return nil
}

// freezeBlueIn freezes blue's metadata (Deployment.FreezeBlue) when the
// scenario is sc, the one that freezes it at this point of the script.
func (s *script) freezeBlueIn(sc Scenario) {
	if s.cfg.Scenario == sc {
		s.d.FreezeBlue()
		s.event(ScriptBlueMetadataFrozen)
	}
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	if d := time.Until(t); d <= 0 || !pause.For(ctx, d, nil) {
		return ctx.Err()
	}
	return nil
}

func (s *script) run(ctx context.Context, t Timings) error {
	d := s.d
	if d.Status() == "" {
		if err := s.status(ctx, StatusAvailable); err != nil {
			return err
		}
	}
	if err := s.status(ctx, StatusInitiated); err != nil {
		return err
	}
	if err := sleepUntil(ctx, time.Now().Add(t.Preparation)); err != nil {
		return err
	}

	// IN_PROGRESS: blue stops taking writes and connections.
	if err := s.status(ctx, StatusInProgress); err != nil {
		return err
	}
	s.freezeBlueIn(ScenarioFrozenBlue)
	inProgress := time.Now()
	if err := s.closeBlue(ctx); err != nil {
		return err
	}
	s.event(ScriptBlueReadOnly)
	if s.cfg.Replication != nil {
		if err := s.cfg.Replication.CatchUp(ctx); err != nil {
			return err
		}
		s.event(ScriptGreenCaughtUp)
	}
	if s.cfg.Scenario == ScenarioRollback {
		if err := sleepUntil(ctx, inProgress.Add(t.InProgress/2)); err != nil {
			return err
		}
		if err := s.reopenBlue(ctx, true); err != nil {
			return err
		}
		if err := s.status(ctx, StatusAvailable); err != nil {
			return err
		}
		s.event(ScriptRolledBack)
		return nil
	}
	if err := s.promoteGreen(ctx); err != nil {
		return err
	}
	s.event(ScriptGreenWritable)
	s.res.Switched = true
	if s.cfg.Scenario == ScenarioDNSBeforePost {
		if err := sleepUntil(ctx, inProgress.Add(t.InProgress/2)); err != nil {
			return err
		}
		d.SwapDNS()
		s.event(ScriptBlueDNSUpdated)
	}
	if err := sleepUntil(ctx, inProgress.Add(t.InProgress)); err != nil {
		return err
	}

	// POST (unless the status is stuck): old blue reopens read-only, then
	// names swap in the metadata and in DNS, then COMPLETED.
	stuck := s.cfg.Scenario == ScenarioStuck
	if !stuck {
		if err := s.status(ctx, StatusPostProcessing); err != nil {
			return err
		}
	}
	s.freezeBlueIn(ScenarioFrozenBluePost)
	post := time.Now()
	if err := s.reopenBlue(ctx, false); err != nil {
		return err
	}
	s.event(ScriptBlueReopened)
	type step struct {
		at   time.Duration
		name string
		do   func() error
	}
	var steps []step
	if !stuck {
		steps = append(steps,
			step{t.Rename, ScriptRenamed, func() error { return d.Rename(ctx) }},
			step{t.Completed, StatusCompleted, func() error {
				if err := d.SetStatus(ctx, StatusCompleted); err != nil {
					return err
				}
				return d.DropSource(ctx)
			}})
	}
	if !stuck && d.Env.cfg.NodeCerts {
		// Certificates matter only where each server has its own.
		steps = append(steps, step{t.Rename + t.Certificates, ScriptCertsRenewed, func() error { d.RenewCertificates(); return nil }})
	}
	if s.cfg.Scenario != ScenarioDNSBeforePost {
		steps = append(steps, step{t.BlueDNS, ScriptBlueDNSUpdated, func() error { d.SwapDNS(); return nil }})
	}
	steps = append(steps, step{t.GreenDNS, ScriptGreenDNSGone, func() error { d.RemoveGreenDNS(); return nil }})
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	for _, st := range steps {
		if err := sleepUntil(ctx, post.Add(st.at)); err != nil {
			return err
		}
		if err := st.do(); err != nil {
			return err
		}
		s.event(st.name)
	}
	if stuck {
		return nil
	}
	if err := sleepUntil(ctx, time.Now().Add(t.Empty)); err != nil {
		return err
	}
	if err := d.SetStatus(ctx, ""); err != nil {
		return err
	}
	s.event(ScriptMetadataEmpty)
	return nil
}

// closeBlue makes blue's database refuse new connections from
// non-superusers and writes from new sessions, then terminates its client
// sessions.
func (s *script) closeBlue(ctx context.Context) error {
	blue, db := s.d.Env.Blue, s.d.Database
	if err := execSession(ctx, blue, "postgres",
		"ALTER DATABASE "+db+" SET default_transaction_read_only = on",
		"ALTER DATABASE "+db+" CONNECTION LIMIT 0"); err != nil {
		return err
	}
	return terminate(ctx, blue, db)
}

// reopenBlue lets blue's database accept connections again, read-only
// unless writable (a rollback).
func (s *script) reopenBlue(ctx context.Context, writable bool) error {
	blue, db := s.d.Env.Blue, s.d.Database
	stmts := []string{"ALTER DATABASE " + db + " CONNECTION LIMIT -1"}
	if writable {
		stmts = append([]string{"ALTER DATABASE " + db + " RESET default_transaction_read_only"}, stmts...)
	}
	return execSession(ctx, blue, "postgres", stmts...)
}

// promoteGreen makes green writable: through the Replication, or directly.
func (s *script) promoteGreen(ctx context.Context) error {
	if s.cfg.Replication != nil {
		return s.cfg.Replication.Promote(ctx)
	}
	green, db := s.d.Env.Green, s.d.Database
	return errors.Join(execSession(ctx, green, "postgres", "ALTER DATABASE "+db+" RESET default_transaction_read_only"),
		terminate(ctx, green, db))
}
