package pgtest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/pgstartup"
)

// TrapConfig configures a [Trap].
type TrapConfig struct {
	// Host is the loopback address the trap listens on (default
	// 127.0.0.1), on a free port.
	Host string
	// Names, when not empty, make the trap serve TLS (it answers an
	// SSLRequest with 'S') with a certificate for them, signed by a CA of
	// its own ([Trap.CAPEM]): a client that trusts that CA, as a client
	// trusts a public CA that issued an attacker's certificate for a name
	// of the attacker's, completes sslmode=verify-full against it. Without
	// Names it refuses TLS ('N'), as a server without it does.
	Names []string
	// Hold, when positive, keeps each connection that long after its
	// startup message before the password request: a slow server, so
	// that the attempts a client makes at once pile up
	// ([Trap.MaxConcurrent]).
	Hold time.Duration
}

// Login is what a client sent a [Trap] in one connection attempt.
type Login struct {
	User, Database string
	Application    string // the application_name it gave
	Password       string // as sent in cleartext ("" when the client sent none)
	TLS            bool   // the attempt ran over TLS
	ServerName     string // the TLS server name the client asked for (SNI)
}

// Trap is a TCP listener that plays a PostgreSQL server just long enough
// to learn what a client would send one: it counts every connection
// attempt, asks for the password in cleartext (as a server with
// "password" authentication does, which pgx answers), records it, and
// refuses the login (FATAL 28P01). Tests point a host name a poisoned row
// names at it and assert that it receives nothing: no connection, no
// password, no token.
//
// A Trap runs one goroutine for its accept loop and one per connection;
// Close stops and joins them. It is safe for concurrent use.
type Trap struct {
	ln    net.Listener
	tls   *tls.Config
	caPEM []byte
	hold  time.Duration
	done  chan struct{} // closed by Close: a held connection ends at once
	once  sync.Once

	mu       sync.Mutex
	attempts int
	open     int // connections open now
	maxOpen  int
	logins   []Login
	changed  chan struct{}

	wg sync.WaitGroup
}

// StartTrap starts a Trap.
func StartTrap(cfg TrapConfig) (*Trap, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	t := &Trap{changed: make(chan struct{}), hold: cfg.Hold, done: make(chan struct{})}
	if len(cfg.Names) > 0 {
		ca, err := certs.New()
		if err != nil {
			return nil, err
		}
		kp, err := ca.KeyPair(cfg.Names[0], cfg.Names)
		if err != nil {
			return nil, err
		}
		t.caPEM = ca.CertPEM()
		t.tls = &tls.Config{Certificates: []tls.Certificate{*kp}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, "0"))
	if err != nil {
		return nil, err
	}
	t.ln = ln
	t.wg.Add(1)
	go t.serve()
	return t, nil
}

// Addr returns the address the trap listens on, "ip:port" (a resolver
// answer that pgx takes with its port).
func (t *Trap) Addr() string { return t.ln.Addr().String() }

// CAPEM returns the certificate of the CA that signed the trap's
// certificate, PEM; nil without TrapConfig.Names.
func (t *Trap) CAPEM() []byte { return t.caPEM }

// Trust makes every TLS configuration of cc (its own and its fallbacks')
// trust the trap's CA besides the roots it has: what a client trusting a
// public CA is to an attacker with a certificate from that CA. It does
// nothing without TrapConfig.Names.
func (t *Trap) Trust(cc *pgx.ConnConfig) {
	if t.caPEM == nil {
		return
	}
	trust := func(tc *tls.Config) {
		if tc == nil {
			return
		}
		if tc.RootCAs == nil {
			if sys, err := x509.SystemCertPool(); err == nil {
				tc.RootCAs = sys
			} else {
				tc.RootCAs = x509.NewCertPool()
			}
		} else {
			tc.RootCAs = tc.RootCAs.Clone()
		}
		tc.RootCAs.AppendCertsFromPEM(t.caPEM)
	}
	trust(cc.TLSConfig)
	for _, fb := range cc.Fallbacks {
		trust(fb.TLSConfig)
	}
}

// Attempts returns how many connections the trap accepted.
func (t *Trap) Attempts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempts
}

// Logins returns what the clients sent, one per attempt that got as far
// as a startup message.
func (t *Trap) Logins() []Login {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Login(nil), t.logins...)
}

// MaxConcurrent returns the most connections the trap had open at once:
// from its accept to the refusal of its login (or its end), so that a
// client that waits for the refusal before connecting again is not
// counted twice.
func (t *Trap) MaxConcurrent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxOpen
}

// Changed returns a channel closed at the trap's next attempt or login.
func (t *Trap) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// Close stops the trap and joins its goroutines (each connection ends
// within its 10 s deadline at most, at once when its client is gone).
// Calls after the first return the listener's error of a second close.
func (t *Trap) Close() error {
	err := t.ln.Close()
	t.once.Do(func() { close(t.done) })
	t.wg.Wait()
	return err
}

func (t *Trap) note(f func()) {
	t.mu.Lock()
	f()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

func (t *Trap) serve() {
	defer t.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		t.note(func() {
			t.attempts++
			t.open++
			t.maxOpen = max(t.maxOpen, t.open)
		})
		conns.Go(func() {
			var ended sync.Once // the login refused, or the connection gone
			end := func() { ended.Do(func() { t.note(func() { t.open-- }) }) }
			defer end()
			t.handle(c, end)
		})
	}
}

// handle plays one connection: TLS when asked and configured, the
// startup message, a cleartext password request, then FATAL 28P01. end
// is called once the login is refused, before the refusal is sent: a
// client that has read it is no longer counted open.
func (t *Trap) handle(c net.Conn, end func()) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	conn, be, msg, err := pgstartup.Negotiate(c, t.tls)
	if err != nil {
		return
	}
	m, ok := msg.(*pgproto3.StartupMessage)
	if !ok {
		return // a CancelRequest
	}
	login := Login{User: m.Parameters["user"], Database: m.Parameters["database"], Application: m.Parameters["application_name"]}
	if tc, ok := conn.(*tls.Conn); ok {
		login.TLS, login.ServerName = true, tc.ConnectionState().ServerName
	}
	t.ask(be, login, end)
}

// ask asks for the password, records the login, and refuses it.
func (t *Trap) ask(be *pgproto3.Backend, login Login, end func()) {
	recorded := false
	record := func() {
		if !recorded {
			recorded = true
			t.note(func() { t.logins = append(t.logins, login) })
		}
	}
	defer record()
	if t.hold > 0 {
		h := time.NewTimer(t.hold)
		select {
		case <-h.C:
		case <-t.done:
		}
		h.Stop()
	}
	be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if be.Flush() != nil || be.SetAuthType(pgproto3.AuthTypeCleartextPassword) != nil {
		return
	}
	msg, err := be.Receive()
	if err != nil {
		return
	}
	if pm, ok := msg.(*pgproto3.PasswordMessage); ok {
		login.Password = pm.Password
	}
	record()
	end()
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "28P01",
		Message: "password authentication failed for user \"" + login.User + "\""})
	_ = be.Flush()
}
