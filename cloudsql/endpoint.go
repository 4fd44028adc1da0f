package cloudsql

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"cloud.google.com/go/cloudsqlconn"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
)

// ReasonInstanceChanged is the classification reason of a
// [*SwitchoverError]: Transient.
const ReasonInstanceChanged = "instance-changed"

// Switchover is the event of a DNS name (a Cloud SQL write endpoint, or a
// name of your own with a TXT or CNAME record) that names another instance
// than before: an advanced DR switchover or replica failover. [With] and
// [WithWriteEndpoint] report it once per move, with a log line and
// [EndpointConfig].OnSwitchover.
type Switchover struct {
	Name string    // the DNS name dialed
	From string    // the instance it named, "project:region:instance"
	To   string    // the instance it names now
	At   time.Time // when holdfast saw the move
}

// SwitchoverError is the failure of a connection, or of a dial, that the
// move of a DNS name to another instance caused, with the move: a
// connection the connector closed because the name moved (it checks the
// name every cloudsqlconn.WithFailoverPeriod, 30 s by default), or a dial
// that failed the TLS handshake because the connector still held the old
// instance's certificate while the name led to the new one (the connector
// then drops it: the next dial works). It is Transient
// ([ReasonInstanceChanged]) unless what was in flight decides otherwise
// (a statement sent on the closed connection is still outcome-unknown).
type SwitchoverError struct {
	Switchover
	Err error
}

func (e *SwitchoverError) Error() string {
	return fmt.Sprintf("cloudsql: %s moved from %s to %s (a switchover): %v", e.Name, e.From, e.To, e.Err)
}

func (e *SwitchoverError) Unwrap() error { return e.Err }

// hint is the cause of a TLS failure after the move, for the log line.
func tlsHint(s Switchover) string {
	return fmt.Sprintf("the connector held %s's certificate while %s led to %s; it drops it after this failure or at its next check of the name (cloudsqlconn.WithFailoverPeriod). If TLS keeps failing, the new primary's SSL configuration differs from the old one's (advanced DR requires the same on both)", s.From, s.Name, s.To)
}

// EndpointConfig configures [WithWriteEndpoint].
type EndpointConfig struct {
	// Logger receives the switchover's line (Warn); nil: slog.Default().
	Logger *slog.Logger
	// OnSwitchover, when set, is called with each switchover, on the
	// goroutine that saw it; it must not block.
	OnSwitchover func(Switchover)
}

// WithWriteEndpoint is [With] for a DNS name that names the primary
// instance and moves (a Cloud SQL write endpoint, or a name of your own
// with a TXT record), with what it does when the name moves configured.
// The dialer must be built with cloudsqlconn.WithDNSResolver() (and,
// for a move seen within seconds, a short cloudsqlconn.WithFailoverPeriod;
// the default is 30 s).
//
// holdfast reads the instance the name names at each dial, as the
// connector does (net.DefaultResolver: a TXT record holding
// "project:region:instance", or a CNAME chain to an instance's DNS name), and when a connection fails because the connector closed
// it or a dial fails its TLS handshake, reads it again. When it changed,
// it reports a [Switchover] (a Warn line naming the name and both
// instances, and OnSwitchover), closes every connection to the old
// instance at once (as the connector does at its own check), and each
// failure this causes is a [*SwitchoverError]:
// Transient, so that a connection whose statement was not sent, or a
// dial, is retried, on the new primary. Writes that reach the old primary
// once it is a read-only replica (25006) make the pool's outage layer
// hold them until the name leads to a writable server (WithOutage's
// HoldFor).
func WithWriteEndpoint(d *cloudsqlconn.Dialer, name string, c EndpointConfig, opts ...cloudsqlconn.DialOption) holdfast.Option {
	if err := checkArgs(d, name); err != nil {
		return holdfast.WithIntegration(holdfast.Integration{Name: "cloudsql", Err: err})
	}
	in := Integration(d, name, opts...)
	w := newWatch(name, c)
	in.Dial = w.dial(dialFunc(d, name, opts))
	in.Rules = append([]classify.Rule{switchoverRule}, in.Rules...)
	return holdfast.WithIntegration(in)
}

// isConnName reports whether s has the form of an instance connection
// name, "project:region:instance" (a domain-scoped project has a ':' of
// its own); anything else is dialed as a DNS name.
func isConnName(s string) bool { return connNameRE.MatchString(s) }

var connNameRE = regexp.MustCompile(`^([^:]+(:[^:]+)?):([^:]+):([^:]+)$`)

// instanceDNSName is the connector's pattern of an instance's DNS name:
// instance.project.region.(sql|sql-psa|sql-psc).goog.
var instanceDNSName = regexp.MustCompile(`^([a-z0-9-]+)\.([a-z0-9-]+)\.([a-z0-9-]+)\.(sql|sql-psa|sql-psc)\.goog\.?$`)

// switchoverRule classifies a *SwitchoverError Transient: the rule runs
// after the factory's own, so that a statement in flight stays
// outcome-unknown.
func switchoverRule(err error) (classify.Verdict, bool) {
	var se *SwitchoverError
	if errors.As(err, &se) {
		return classify.Verdict{Class: classify.Transient, Reason: ReasonInstanceChanged}, true
	}
	return classify.Verdict{}, false
}

// watch follows the instance a DNS name names.
type watch struct {
	name   string
	cfg    EndpointConfig
	lookup *net.Resolver // the connector's: net.DefaultResolver

	mu      sync.Mutex
	current string     // the instance last read; "" until the first
	last    Switchover // the last move, for connections dialed before it
	conns   map[*endpointConn]struct{}
}

func newWatch(name string, c EndpointConfig) *watch {
	w := &watch{name: name, cfg: c, lookup: net.DefaultResolver, conns: map[*endpointConn]struct{}{}}
	if w.cfg.Logger == nil {
		w.cfg.Logger = slog.Default()
	}
	return w
}

// instance reads the instance the name names, as the connector's DNS
// resolver does: the first valid TXT record (sorted), else the CNAME
// chain to an instance's DNS name. "" when it cannot tell.
func (w *watch) instance(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cur := w.name
	for range 10 {
		if m := instanceDNSName.FindStringSubmatch(strings.ToLower(cur)); m != nil && m[3] != "global" {
			return m[2] + ":" + m[3] + ":" + m[1]
		}
		if txt, err := w.lookup.LookupTXT(ctx, cur); err == nil {
			sort.Strings(txt)
			for _, r := range txt {
				if isConnName(r) {
					return r
				}
			}
		}
		next, err := w.lookup.LookupCNAME(ctx, cur)
		next = strings.TrimSuffix(next, ".")
		if err != nil || next == "" || next == strings.TrimSuffix(cur, ".") {
			return ""
		}
		cur = next
	}
	return ""
}

// observe records the instance read now, and reports a move.
func (w *watch) observe(now string) (Switchover, bool) {
	if now == "" {
		return Switchover{}, false
	}
	w.mu.Lock()
	prev := w.current
	w.current = now
	var s Switchover
	var retire []*endpointConn
	moved := prev != "" && prev != now
	if moved {
		s = Switchover{Name: w.name, From: prev, To: now, At: time.Now()}
		w.last = s
		for c := range w.conns {
			if c.inst == prev {
				retire = append(retire, c)
				delete(w.conns, c)
			}
		}
	}
	w.mu.Unlock()
	// The connections to the old instance are retired at once, as the
	// connector does at its check of the name: each fails its next read or
	// write with a *SwitchoverError (before anything is sent, the runner
	// and the pool take another connection).
	for _, c := range retire {
		_ = c.Conn.Close()
	}
	if moved {
		w.cfg.Logger.Warn("cloudsql: switchover: the DNS name names another instance; connections to the old one are retired, writes wait for the new primary",
			slog.String("cloudsql.name", s.Name), slog.String("cloudsql.from", s.From), slog.String("cloudsql.to", s.To))
		if w.cfg.OnSwitchover != nil {
			w.cfg.OnSwitchover(s)
		}
	}
	return s, moved
}

// since returns the last move if it happened after the instance was
// inst (a connection dialed to inst), or false.
func (w *watch) since(inst string) (Switchover, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if inst != "" && w.last.From == inst && w.current != inst {
		return w.last, true
	}
	return Switchover{}, false
}

// dial wraps the connector's dial: it reads the name's instance after
// each dial, explains a TLS failure after a move, and wraps the
// connection.
func (w *watch) dial(next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			if isTLSFailure(err) {
				if s, moved := w.observe(w.instance(ctx)); moved {
					w.cfg.Logger.Warn("cloudsql: TLS failure after a switchover", slog.String("hint", tlsHint(s)))
					return nil, &SwitchoverError{Switchover: s, Err: err}
				}
				if s, ok := w.recent(); ok {
					return nil, &SwitchoverError{Switchover: s, Err: err}
				}
			}
			return nil, err
		}
		inst := w.instance(ctx)
		w.observe(inst)
		ec := &endpointConn{Conn: c, w: w, inst: inst}
		w.mu.Lock()
		w.conns[ec] = struct{}{}
		w.mu.Unlock()
		return ec, nil
	}
}

// recent returns the last move if it was within a minute.
func (w *watch) recent() (Switchover, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, !w.last.At.IsZero() && time.Since(w.last.At) < time.Minute
}

// isTLSFailure reports a failed verification of the server's
// certificate in err's chain: its chain or its name, or the connector's
// check of the instance name in its CN ([Rules]).
func isTLSFailure(err error) bool {
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) {
		return true
	}
	_, ok := serverIdentity(err)
	return ok
}

// endpointConn is a connection dialed through a DNS name: a failure
// because the connector closed it (the name moved) is a
// *SwitchoverError.
type endpointConn struct {
	net.Conn
	w      *watch
	inst   string
	closed atomic.Bool // closed by pgx
}

func (c *endpointConn) Close() error {
	c.closed.Store(true)
	c.w.mu.Lock()
	delete(c.w.conns, c)
	c.w.mu.Unlock()
	return c.Conn.Close()
}

func (c *endpointConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return n, c.explain(err)
}

func (c *endpointConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.explain(err)
}

// explain makes err, when the connector closed the connection under pgx
// and the name moved, a *SwitchoverError.
func (c *endpointConn) explain(err error) error {
	if err == nil || c.closed.Load() || !errors.Is(err, net.ErrClosed) {
		return err
	}
	s, ok := c.w.since(c.inst)
	if !ok {
		s, ok = c.w.observe(c.w.instance(context.Background()))
		ok = ok && s.From == c.inst
	}
	if !ok {
		return err
	}
	return &SwitchoverError{Switchover: s, Err: &closedUnder{err}}
}

// closedUnder is a read or write of a connection that the connector (or
// the watch) closed under pgx: the connection broke as a reset would
// break it (the errno is in the chain, so that a transaction's statement
// lost on it reads as not committed, a COMMIT's as unknown).
type closedUnder struct{ err error }

func (e *closedUnder) Error() string   { return e.err.Error() + " (closed by the connector)" }
func (e *closedUnder) Unwrap() []error { return []error{e.err, syscall.ECONNRESET} }
