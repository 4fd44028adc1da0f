package bluegreentest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgstartup"
	"github.com/jackc/pgx/v5/pgproto3"
)

// superuser is the servers' superuser, whom the front end does not ask
// for a token (the test's own administration connects as it).
const superuser = "postgres"

// handshakeTimeout bounds a client's startup handshake at the front end.
const handshakeTimeout = 30 * time.Second

// frontend stands in front of one server when the Env has NodeCerts or
// IAM, where RDS's own front end would be: it speaks the PostgreSQL
// startup protocol with the client, does TLS with the server's
// certificate (its node certificate with NodeCerts, else the wildcards),
// checks the IAM token with IAM, then passes the startup message on to
// the server and relays the bytes both ways. Cancel requests are passed
// on. It runs an accept loop and two goroutines per connection, which
// close stops and joins.
type frontend struct {
	env *Env
	srv *Server
	ln  net.Listener
	tls *tls.Config // nil without Config.TLS

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool

	certMu   sync.Mutex
	certKey  string // the names cert was issued for
	cert     *tls.Certificate
	wildcard *tls.Certificate
}

func startFrontend(e *Env, s *Server) (*frontend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakes/bluegreentest: %s front end: %w", s.Name, err)
	}
	f := &frontend{env: e, srv: s, ln: ln, conns: map[net.Conn]bool{}}
	if e.cfg.TLS {
		if !e.cfg.NodeCerts {
			if f.wildcard, err = e.ca.KeyPair(s.Name, Wildcards(e.cfg.Account, e.cfg.Region)); err != nil {
				ln.Close()
				return nil, err
			}
		}
		f.tls = &tls.Config{GetCertificate: f.certificate, MinVersion: tls.VersionTLS12}
	}
	f.wg.Go(f.serve)
	return f, nil
}

func (f *frontend) addr() string { return f.ln.Addr().String() }

func (f *frontend) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Go(func() {
			defer f.untrack(c)
			f.handle(c)
		})
	}
}

// track registers c for close; false once closed.
func (f *frontend) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = true
	return true
}

func (f *frontend) untrack(c net.Conn) {
	c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// close stops the front end and closes every connection through it. f may
// be nil.
func (f *frontend) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		f.ln.Close()
		for c := range f.conns {
			c.Close()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// certificate is the server's certificate at this moment: a node
// certificate for the names it carries now (reissued when they change),
// or the wildcards.
func (f *frontend) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if f.wildcard != nil {
		return f.wildcard, nil
	}
	names := f.env.answers(f.srv, true)
	key := strings.Join(names, ",")
	f.certMu.Lock()
	defer f.certMu.Unlock()
	if f.cert == nil || key != f.certKey {
		c, err := f.env.ca.KeyPair(f.srv.Name, names)
		if err != nil {
			return nil, err
		}
		f.cert, f.certKey = c, key
	}
	return f.cert, nil
}

// handle serves one client connection.
func (f *frontend) handle(client net.Conn) {
	_ = client.SetDeadline(time.Now().Add(handshakeTimeout))
	conn, be, msg, err := pgstartup.Negotiate(client, f.tls)
	if err != nil {
		return
	}
	if cr, ok := msg.(*pgproto3.CancelRequest); ok {
		f.cancel(cr)
		return
	}
	m := msg.(*pgproto3.StartupMessage)
	startup := &pgproto3.StartupMessage{ProtocolVersion: m.ProtocolVersion, Parameters: m.Parameters}
	if user := startup.Parameters["user"]; f.env.cfg.IAM && user != superuser {
		if err := f.authenticate(be, user); err != nil {
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "28000",
				Message: fmt.Sprintf("PAM authentication failed for user %q", user), Detail: err.Error()})
			_ = be.Flush()
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	server, err := (&net.Dialer{}).DialContext(ctx, "tcp", f.srv.ListenAddr)
	cancel()
	if err != nil {
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
			Message: "the database system is not accepting connections: " + err.Error()})
		_ = be.Flush()
		return
	}
	if !f.track(server) {
		server.Close()
		return
	}
	defer f.untrack(server)
	buf, err := startup.Encode(nil)
	if err != nil {
		return
	}
	if _, err := server.Write(buf); err != nil {
		return
	}
	_ = conn.SetDeadline(time.Time{})
	relay(conn, server)
}

// authenticate asks the client for its password, as RDS does for an IAM
// user, and checks it as an IAM token signed for one of the server's names.
func (f *frontend) authenticate(be *pgproto3.Backend, user string) error {
	be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if err := be.Flush(); err != nil {
		return err
	}
	if err := be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
		return err
	}
	msg, err := be.Receive()
	if err != nil {
		return err
	}
	pm, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return fmt.Errorf("expected a password message, got %T", msg)
	}
	return f.env.checkToken(f.srv, user, pm.Password)
}

// cancel passes a cancel request on to the server.
func (f *frontend) cancel(m *pgproto3.CancelRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	server, err := (&net.Dialer{}).DialContext(ctx, "tcp", f.srv.ListenAddr)
	if err != nil {
		return
	}
	defer server.Close()
	buf, err := m.Encode(nil)
	if err != nil {
		return
	}
	_ = server.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := server.Write(buf); err == nil {
		_, _ = io.Copy(io.Discard, server) // the server closes it when done
	}
}

// relay copies bytes both ways until either side ends, then closes both.
func relay(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(a, b)
		a.Close()
		b.Close()
	}()
	_, _ = io.Copy(b, a)
	a.Close()
	b.Close()
	<-done
}
