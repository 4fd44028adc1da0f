package pgstartup

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"

	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/jackc/pgx/v5/pgproto3"
)

type negotiated struct {
	conn net.Conn
	msg  pgproto3.FrontendMessage
	err  error
}

// negotiate runs Negotiate on the server end of a pipe, and client on its
// client end.
func negotiate(t *testing.T, cfg *tls.Config, client func(c net.Conn)) negotiated {
	t.Helper()
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	done := make(chan negotiated, 1)
	go func() {
		conn, _, msg, err := Negotiate(sc, cfg)
		done <- negotiated{conn, msg, err}
	}()
	client(cc)
	return <-done
}

// send writes msg as a client's frontend does.
func send(t *testing.T, c net.Conn, msg pgproto3.FrontendMessage) {
	t.Helper()
	fe := pgproto3.NewFrontend(c, c)
	fe.Send(msg)
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
}

// answer reads the server's one-byte answer to an SSLRequest or a
// GSSEncRequest.
func answer(t *testing.T, c net.Conn) byte {
	t.Helper()
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return b[0]
}

func startup() *pgproto3.StartupMessage {
	return &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "app"}}
}

// Without a TLS config, SSL and GSS encryption are refused and the startup
// message is returned, on the connection given.
func TestNegotiatePlain(t *testing.T) {
	got := negotiate(t, nil, func(c net.Conn) {
		send(t, c, &pgproto3.SSLRequest{})
		if b := answer(t, c); b != 'N' {
			t.Errorf("SSLRequest answered %q, want 'N'", b)
		}
		send(t, c, &pgproto3.GSSEncRequest{})
		if b := answer(t, c); b != 'N' {
			t.Errorf("GSSEncRequest answered %q, want 'N'", b)
		}
		send(t, c, startup())
	})
	if got.err != nil {
		t.Fatal(got.err)
	}
	if _, ok := got.conn.(*tls.Conn); ok {
		t.Error("a TLS connection without a TLS config")
	}
	if m, ok := got.msg.(*pgproto3.StartupMessage); !ok || m.Parameters["user"] != "app" {
		t.Errorf("message %#v, want the startup message", got.msg)
	}
}

// With one, the first SSLRequest upgrades the connection, a second one is
// refused, and the startup message is read over TLS.
func TestNegotiateTLS(t *testing.T) {
	ca, err := certs.New()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.KeyPair("db", []string{"db.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	cfg := &tls.Config{Certificates: []tls.Certificate{*kp}, MinVersion: tls.VersionTLS12}
	got := negotiate(t, cfg, func(c net.Conn) {
		send(t, c, &pgproto3.SSLRequest{})
		if b := answer(t, c); b != 'S' {
			t.Fatalf("SSLRequest answered %q, want 'S'", b)
		}
		tc := tls.Client(c, &tls.Config{ServerName: "db.example.com", RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		send(t, tc, &pgproto3.SSLRequest{})
		if b := answer(t, tc); b != 'N' {
			t.Errorf("second SSLRequest answered %q, want 'N'", b)
		}
		send(t, tc, startup())
	})
	if got.err != nil {
		t.Fatal(got.err)
	}
	if tc, ok := got.conn.(*tls.Conn); !ok || tc.ConnectionState().ServerName != "db.example.com" {
		t.Errorf("connection %T, want the TLS one for db.example.com", got.conn)
	}
	if _, ok := got.msg.(*pgproto3.StartupMessage); !ok {
		t.Errorf("message %T, want the startup message", got.msg)
	}
}

// A cancel request ends the negotiation too; a client gone is an error.
func TestNegotiateCancelAndEOF(t *testing.T) {
	got := negotiate(t, nil, func(c net.Conn) {
		send(t, c, &pgproto3.CancelRequest{ProcessID: 7, SecretKey: []byte{1, 2, 3, 4}})
	})
	if m, ok := got.msg.(*pgproto3.CancelRequest); got.err != nil || !ok || m.ProcessID != 7 {
		t.Errorf("got %#v, %v; want the cancel request", got.msg, got.err)
	}
	got = negotiate(t, nil, func(c net.Conn) { c.Close() })
	if got.err == nil {
		t.Errorf("got %#v, want an error", got.msg)
	}
}
