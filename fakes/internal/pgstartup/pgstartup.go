// Package pgstartup is the start of a PostgreSQL connection on the server
// side, for the fakes that speak the protocol to clients themselves
// (fakes/pgtest's Trap, fakes/bluegreentest's front end): the requests a
// client may send before its startup message, answered as a server does.
package pgstartup

import (
	"crypto/tls"
	"net"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Negotiate reads what the client on c sends up to the message that
// starts or cancels a session. An SSLRequest is answered 'S', and c
// upgraded to TLS with cfg, when cfg is not nil and c is not upgraded
// yet; else 'N'. A GSSEncRequest is answered 'N'.
//
// It returns the connection to go on with (a *tls.Conn once upgraded),
// its backend, and the message that ended the negotiation: a
// *pgproto3.StartupMessage or a *pgproto3.CancelRequest. An error (a
// failed read or write, a handshake the client refused) means the client
// is to be dropped.
func Negotiate(c net.Conn, cfg *tls.Config) (net.Conn, *pgproto3.Backend, pgproto3.FrontendMessage, error) {
	conn := c
	be := pgproto3.NewBackend(conn, conn)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return nil, nil, nil, err
		}
		switch msg.(type) {
		case *pgproto3.SSLRequest:
			if cfg == nil || conn != c {
				if _, err := conn.Write([]byte{'N'}); err != nil {
					return nil, nil, nil, err
				}
				continue
			}
			if _, err := conn.Write([]byte{'S'}); err != nil {
				return nil, nil, nil, err
			}
			tc := tls.Server(c, cfg)
			if err := tc.Handshake(); err != nil {
				return nil, nil, nil, err // the client saw why (a certificate it does not accept)
			}
			conn = tc
			be = pgproto3.NewBackend(tc, tc)
		case *pgproto3.GSSEncRequest:
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return nil, nil, nil, err
			}
		case *pgproto3.CancelRequest, *pgproto3.StartupMessage:
			return conn, be, msg, nil
		}
	}
}
