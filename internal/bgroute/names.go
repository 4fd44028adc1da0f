package bgroute

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/internal/bgroute/switchover"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file is the routing's answer to "who is the server I reach": the
// names to issue an IAM token for, and the names its certificate may
// carry, when they are not the name the connection asked for (see the
// documentation of bluegreen.Name).

// identify applies the identities of names to cc, a per-connection copy
// (pgxpool and the monitors copy the config for each connection, TLS
// configurations included): every TLS configuration of a host with an
// identity accepts the certificate for its names; it returns the Auth
// names of cc.Host (nil: none). flip, when set, reverses them. Names
// outside the deployment's domain (r.scope) are neither accepted nor
// given a token.
func (r *Router) identify(cc *pgx.ConnConfig, names map[string]switchover.Identity, flip map[string]bool) (auth []string) {
	host := topology.NormHost(cc.Host)
	if id, ok := names[host]; ok {
		r.acceptNames(cc.TLSConfig, id.Cert)
		if auth = r.scope.Filter(id.Auth); len(auth) == 0 {
			auth = nil
		}
		if flip[host] && len(auth) > 1 {
			auth = slices.Clone(auth)
			slices.Reverse(auth)
		}
	}
	for _, fb := range cc.Fallbacks {
		if id, ok := names[topology.NormHost(fb.Host)]; ok {
			r.acceptNames(fb.TLSConfig, id.Cert)
		}
	}
	return auth
}

// identifyMonitor wraps a monitor's connect hook: the monitor's connection
// gets the identity of the server it reaches (its start address during a
// switchover; after a completed one, the lingering names) before next
// runs, told the names to issue the connection's token for.
func (r *Router) identifyMonitor(next func(context.Context, *pgx.ConnConfig, []string) error) func(context.Context, *pgx.ConnConfig) error {
	return func(ctx context.Context, cc *pgx.ConnConfig) error {
		host := topology.NormHost(cc.Host)
		r.mu.Lock()
		id, ok := r.st.MonitorIdentity(host)
		var flip map[string]bool
		if r.authFlip[host] {
			flip = map[string]bool{host: true}
		}
		r.mu.Unlock()
		var names map[string]switchover.Identity
		if ok {
			names = map[string]switchover.Identity{host: id}
		} else if s := r.snap.Load(); len(s.Names) > 0 && (s.NamesUntil.IsZero() || r.now().Before(s.NamesUntil)) {
			names = s.Names
		}
		var auth []string
		if names != nil {
			auth = r.identify(cc, names, flip)
		}
		if next != nil {
			return next(ctx, cc, auth)
		}
		return nil
	}
}

// authRejected reports whether err is the server refusing the password or
// token (SQLSTATE 28000, as RDS answers a token for the wrong name, or
// 28P01).
func authRejected(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "28000" || pe.Code == "28P01")
}

// acceptNames makes c, a connection's own TLS configuration, accept the
// server's certificate when it is valid for any of names that lie in the
// deployment's domain (r.scope; the name asked for first), with the whole
// chain verified as crypto/tls does: against
// c.RootCAs (the system pool when nil), at c.Time, for server
// authentication. It leaves c alone when c verifies no host name (nil,
// verify-ca, sslmode=require) or when names add nothing to c.ServerName.
//
// crypto/tls checks the certificate against ServerName only, before any
// callback runs; so acceptNames turns that check off (InsecureSkipVerify)
// and does all of it in VerifyConnection, then runs c's own
// VerifyConnection. c's VerifyPeerCertificate, if any, still runs, but
// without verified chains. c is changed in place, not copied: pgx finds a
// connection's client certificate (sslcert, sslkey) by its *tls.Config,
// and a copy would go without it.
func (r *Router) acceptNames(c *tls.Config, names []string) {
	names = r.scope.Filter(names) // a name a row gave, outside the domain: never accepted
	if c == nil || c.InsecureSkipVerify || c.ServerName == "" || len(names) == 0 ||
		len(names) == 1 && names[0] == topology.NormHost(c.ServerName) {
		return
	}
	roots, now := c.RootCAs, c.Time
	asked := c.ServerName
	user := c.VerifyConnection
	c.InsecureSkipVerify = true // VerifyConnection below verifies the chain and the names
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		aliased, err := verifyNames(roots, now, cs, asked, names)
		if err != nil {
			return err
		}
		if aliased {
			r.aliasedCerts.Add(1)
		}
		if user != nil {
			return user(cs)
		}
		return nil
	}
}

// verifyNames verifies cs's certificate chain as crypto/tls does for a
// client, and the leaf for asked or, failing that, any of names; aliased
// is true when only another name matched. The error is the one for asked.
func verifyNames(roots *x509.CertPool, now func() time.Time, cs tls.ConnectionState, asked string, names []string) (aliased bool, err error) {
	if len(cs.PeerCertificates) == 0 {
		return false, errors.New("bluegreen: the server sent no certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         roots,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if now != nil {
		opts.CurrentTime = now()
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(opts); err != nil { // the chain; the names below
		return false, err
	}
	first := leaf.VerifyHostname(asked)
	if first == nil {
		return false, nil
	}
	for _, n := range names {
		if leaf.VerifyHostname(n) == nil {
			return true, nil
		}
	}
	return false, first
}
