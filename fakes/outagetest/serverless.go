package outagetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/holdfast-db/holdfast/fakes/internal/pgstartup"
	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/pause"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of [ServerlessConfig], scaled for tests.
const (
	DefaultAutoPause = time.Second
	DefaultResume    = time.Second
)

// The events of a [Serverless] instance.
const (
	// The instance paused: no client connection for AutoPause, its
	// server shut down.
	EventPaused = "paused"
	// A connection attempt reached the paused instance, which resumes
	// (the event's time is the attempt's).
	EventResuming = "resuming"
	// The instance answers again: its held connections go through.
	EventResumed = "resumed"
)

// ServerlessConfig configures [StartServerless]. Zero durations take the
// defaults, scaled for tests; [DemoServerless] has a demo's.
type ServerlessConfig struct {
	// Name, Account and Region shape the endpoint,
	// NAME.cluster-ACCOUNT.REGION.rds.amazonaws.com.
	Name, Account, Region string
	// Host is the loopback address of the instance (its front) and of
	// its server. Default DefaultPrimaryHost; 127.0.0.1 where it cannot
	// be bound.
	Host string
	// AutoPause is how long the instance stays up with no client
	// connection before it pauses (Aurora's SecondsUntilAutoPause, 300 s
	// to a day). Default DefaultAutoPause; negative never pauses.
	AutoPause time.Duration
	// Resume is how long a connection attempt to the paused instance
	// waits, from the first attempt, before the instance answers (Aurora:
	// up to 15 s, about 30 s after a day paused). It is at least the
	// time the server takes to start (0.5 to 1.8 s on two loaded cores).
	// Default DefaultResume.
	Resume time.Duration
	// StartingUp makes the instance refuse each connection attempt while
	// it resumes with FATAL 57P03 ("the database system is starting
	// up"), as some clients saw, instead of holding it.
	StartingUp bool
}

// DemoServerless returns a demo's timings: a pause after 10 s without a
// connection, a resume of 15 s (Aurora's figure).
func DemoServerless() ServerlessConfig {
	return ServerlessConfig{AutoPause: 10 * time.Second, Resume: 15 * time.Second}
}

// Serverless is an Aurora Serverless v2 instance that scales to zero: a
// front (a TCP forwarder in the test process, on the instance's
// address) before a real PostgreSQL server. The instance pauses after
// AutoPause with no client connection: the front counts its
// connections, and any keeps the instance awake, a monitor's or one
// that fails its login too. Paused, its server is shut down; a
// connection attempt is accepted and held, answered nothing, while the
// server starts again, and relayed once Resume has passed since the
// first attempt: the client sees a delay, not an error (or, with
// StartingUp, a 57P03 refusal). Close it when done. It is safe for
// concurrent use; it runs the front's goroutines and one that pauses
// and resumes, which Close stops and joins.
type Serverless struct {
	// Endpoint is the instance's endpoint (its cluster's writer
	// endpoint), NAME.cluster-ACCOUNT.REGION.rds.amazonaws.com; Resolver,
	// the fake DNS, resolves it to the front's address. It never moves.
	Endpoint string
	Resolver *bluegreentest.Resolver

	cfg    ServerlessConfig
	server *pgtest.Server
	front  *front
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	kick   chan struct{} // wakes run
	wg     sync.WaitGroup

	mu        sync.Mutex
	state     instanceState
	conns     int
	idleSince time.Time     // since when conns is 0
	wake      time.Time     // the first attempt since the pause; zero when none waits
	awake     chan struct{} // closed while awake
	pauses    int
	resumes   int
	events    []Event
	changed   chan struct{}
	err       error // the last pause or resume that failed
}

type instanceState int

const (
	awake instanceState = iota
	pausing
	paused
	resuming
)

// StartServerless starts the instance's server (initdb) and its front,
// awake; ctx bounds the start.
func StartServerless(ctx context.Context, cfg ServerlessConfig) (*Serverless, error) {
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	cfg.Account = cmp.Or(cfg.Account, DefaultAccount)
	cfg.Region = cmp.Or(cfg.Region, DefaultRegion)
	cfg.Host = cmp.Or(cfg.Host, DefaultPrimaryHost)
	if pgnode.CanBind(cfg.Host) != nil {
		cfg.Host = "127.0.0.1"
	}
	cfg.AutoPause = cmp.Or(cfg.AutoPause, DefaultAutoPause)
	cfg.Resume = cmp.Or(cfg.Resume, DefaultResume)
	srv, err := pgtest.Start(ctx, pgtest.Options{Host: cfg.Host})
	if err != nil {
		return nil, fmt.Errorf("fakes/outagetest: start serverless instance: %w", err)
	}
	s := &Serverless{
		Endpoint: cfg.Name + ".cluster-" + cfg.Account + "." + cfg.Region + ".rds.amazonaws.com",
		Resolver: bluegreentest.NewResolver(),
		cfg:      cfg, server: srv,
		kick: make(chan struct{}, 1), idleSince: time.Now(),
		awake: make(chan struct{}), changed: make(chan struct{}),
	}
	close(s.awake)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.front, err = newFront(cfg.Host, "", frontHooks{admit: s.admit, opened: s.opened, ended: s.ended})
	if err != nil {
		s.cancel()
		return nil, errors.Join(fmt.Errorf("fakes/outagetest: start serverless instance: %w", err), srv.Stop())
	}
	s.Resolver.Set(s.Endpoint, s.front.addr)
	s.wg.Go(s.run)
	return s, nil
}

// Addr returns the instance's address, its front's, "ip:port".
func (s *Serverless) Addr() string { return s.front.addr }

// DSN returns a superuser connection string for host (Endpoint, resolved
// through Resolver by PoolConfig, or Addr()), database postgres, without
// TLS. extra are more "key=value" settings.
func (s *Serverless) DSN(host string, extra ...string) string {
	return pgurl.Endpoint(host, defaultPort, "", extra...)
}

// PoolConfig parses DSN(host, extra...) and sets its LookupFunc to
// Resolver.Lookup.
func (s *Serverless) PoolConfig(host string, extra ...string) (*pgxpool.Config, error) {
	return pgurl.PoolConfig(s.DSN(host, extra...), s.Resolver.Lookup)
}

// Paused reports whether the instance is paused: its server shut down or
// shutting down, or starting again. A connection attempt now waits for
// the resume.
func (s *Serverless) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state != awake
}

// Pauses returns how many times the instance paused.
func (s *Serverless) Pauses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pauses
}

// Resumes returns how many times the instance resumed.
func (s *Serverless) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// Conns returns how many client connections the instance has now: every
// connection its front accepted and has not closed, held ones and
// those in their login too.
func (s *Serverless) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Events returns the instance's events so far, in order.
func (s *Serverless) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// Changed returns a channel closed at the next event or change of
// Conns, to wait for a state without polling.
func (s *Serverless) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// notifyLocked wakes Changed's waiters; s.mu is held.
func (s *Serverless) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// emitLocked records an event; s.mu is held.
func (s *Serverless) emitLocked(name string, at time.Time) {
	s.events = append(s.events, Event{At: at, Name: name, Server: s.Endpoint})
	s.notifyLocked()
}

// poke wakes run.
func (s *Serverless) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Serverless) opened() {
	s.mu.Lock()
	s.conns++
	s.notifyLocked()
	s.mu.Unlock()
}

func (s *Serverless) ended() {
	s.mu.Lock()
	s.conns--
	if s.conns == 0 {
		s.idleSince = time.Now()
	}
	s.notifyLocked()
	s.mu.Unlock()
	s.poke()
}

// admit is the front's decision for a connection: the server while the
// instance is awake; else the connection waits for the resume (or, with
// StartingUp, is refused with 57P03), and its attempt resumes the
// instance.
func (s *Serverless) admit(c net.Conn, done <-chan struct{}) string {
	for {
		s.mu.Lock()
		if s.state == awake {
			s.mu.Unlock()
			return s.server.Addr()
		}
		if s.wake.IsZero() {
			s.wake = time.Now()
		}
		wait := s.awake
		s.mu.Unlock()
		s.poke()
		if s.cfg.StartingUp {
			refuse(c)
			return ""
		}
		select {
		case <-wait:
		case <-done:
			return ""
		}
	}
}

// refuse answers a connection's startup with FATAL 57P03, as a server
// that is starting up does.
func refuse(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, be, msg, err := pgstartup.Negotiate(c, nil)
	if err != nil {
		return
	}
	if _, ok := msg.(*pgproto3.StartupMessage); !ok {
		return // a cancel request: nothing to cancel
	}
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
		Message: "the database system is starting up"})
	_ = be.Flush()
}

// run pauses the instance when it has had no connection for AutoPause,
// and resumes it when an attempt waits, until Close.
func (s *Serverless) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var act func()
		wait := time.Duration(-1)
		switch {
		case s.state == paused && !s.wake.IsZero():
			s.state, act = resuming, s.resume
		case s.state == awake && s.conns == 0 && s.cfg.AutoPause > 0:
			if wait = time.Until(s.idleSince.Add(s.cfg.AutoPause)); wait <= 0 {
				s.state, s.awake, act = pausing, make(chan struct{}), s.pause
			}
		}
		s.mu.Unlock()
		if act != nil {
			act()
			continue
		}
		if wait > 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-s.kick:
		case <-timer.C:
		case <-s.ctx.Done():
			return
		}
	}
}

// pause shuts the server down (fast: it has no client).
func (s *Serverless) pause() {
	err := s.server.Shutdown(s.ctx, pgtest.ShutdownFast)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = fmt.Errorf("fakes/outagetest: pausing: %w", err)
		s.state, s.idleSince = awake, time.Now()
		close(s.awake)
		s.notifyLocked()
		return
	}
	s.state = paused
	s.pauses++
	s.emitLocked(EventPaused, time.Now())
}

// resume starts the server again and lets the held connections through
// once it accepts and Resume has passed since the first attempt.
func (s *Serverless) resume() {
	s.mu.Lock()
	first := s.wake
	s.emitLocked(EventResuming, first)
	s.mu.Unlock()
	err := s.server.Restart(s.ctx)
	if err == nil && !pause.For(s.ctx, time.Until(first.Add(s.cfg.Resume)), nil) {
		err = context.Cause(s.ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wake = time.Time{}
	if err != nil {
		// The held connections wait on (until their clients give up);
		// the next attempt tries again.
		s.err = fmt.Errorf("fakes/outagetest: resuming: %w", err)
		s.state = paused
		s.notifyLocked()
		return
	}
	s.state, s.idleSince = awake, time.Now()
	close(s.awake)
	s.resumes++
	s.emitLocked(EventResumed, time.Now())
}

// Close stops the front (closing every connection, held ones too), the
// goroutine that pauses and resumes, and the server, and removes its
// directory. It returns the error of a pause or resume that failed, if
// any.
func (s *Serverless) Close() error {
	s.cancel()
	s.front.close()
	s.wg.Wait()
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if errors.Is(err, context.Canceled) {
		err = nil // cut short by Close
	}
	return errors.Join(err, s.server.Stop())
}
