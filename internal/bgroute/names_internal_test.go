package bgroute

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/internal/bgroute/meta"
	"github.com/holdfast-db/holdfast/internal/bgroute/switchover"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestNamesPerPhase checks the identities the routing publishes: none
// before POST; in POST the green name first for the token until the
// metadata shows the rename, then the blue name, and the certificate
// accepted for the blue name and its green counterpart; after a completed
// switchover the blue names keep accepting green's certificate for
// SwitchoverTimeout; a rollback keeps nothing.
func TestNamesPerPhase(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	names := func() map[string]bluegreen.Name {
		out := map[string]bluegreen.Name{}
		for _, n := range h.r.Status().Routing.Names {
			out[n.Host] = n
		}
		return out
	}
	inProgress(h)
	if got := names(); len(got) != 0 {
		t.Errorf("IN_PROGRESS: names %+v, want none", got)
	}
	h.advance(2 * time.Second)
	h.set(meta.StatusSwitchoverPostProcess)
	got := names()
	for host, want := range map[string]bluegreen.Name{
		blueC:  {Auth: []string{greenC, blueC}, Cert: []string{blueC, greenC}},
		blueI:  {Auth: []string{greenI, blueI}, Cert: []string{blueI, greenI}},
		greenC: {Auth: []string{greenC, blueC}, Cert: []string{greenC, blueC}},
		// A blue reader maps to the green reader; without one it would go
		// to the green writer, which takes the blue writer's name.
		blueR: {Auth: []string{greenR, blueR}, Cert: []string{blueR, greenR}},
	} {
		if g, ok := got[host]; !ok || !slices.Equal(g.Auth, want.Auth) || !slices.Equal(g.Cert, want.Cert) {
			t.Errorf("POST %s: %+v, want auth %q cert %q", host, g, want.Auth, want.Cert)
		}
	}
	h.rename()
	h.pollBoth()
	if g := names()[blueC]; !slices.Equal(g.Auth, []string{blueC, greenC}) {
		t.Errorf("POST renamed %s: auth %q, want the blue name first", blueC, g.Auth)
	}
	h.swapDNS()
	h.removeGreenDNS()
	h.advance(time.Second)
	h.set(meta.StatusSwitchoverCompleted)
	st := h.r.Status()
	if st.LastSummary == nil || st.Routing.NamesUntil != h.now.Add(h.r.cfg.SwitchoverTimeout) {
		t.Fatalf("after COMPLETED: summary %v, names until %v; want until %v", st.LastSummary, st.Routing.NamesUntil, h.now.Add(h.r.cfg.SwitchoverTimeout))
	}
	if g := names()[blueC]; !slices.Equal(g.Auth, []string{blueC}) || !slices.Equal(g.Cert, []string{blueC, greenC}) {
		t.Errorf("after COMPLETED %s: %+v, want auth [%s], cert [%s %s]", blueC, g, blueC, blueC, greenC)
	}

	// Route: a connection by the blue name gets the certificate names and
	// no token names (as asked); after NamesUntil, nothing.
	cc := verifyFullConfig(t, blueC)
	own := cc.TLSConfig // pgx keys the client certificate by it: changed in place, never replaced
	auth, err := h.r.route(context.Background(), cc)
	if cc.TLSConfig != own {
		t.Error("Route replaced the connection's tls.Config")
	}
	if err != nil || auth == nil || cc.TLSConfig.VerifyConnection == nil {
		t.Errorf("Route after COMPLETED: err %v, auth hosts %q, VerifyConnection set %v; want the lingering names", err, auth, cc.TLSConfig.VerifyConnection != nil)
	}
	h.advance(h.r.cfg.SwitchoverTimeout)
	cc = verifyFullConfig(t, blueC)
	if auth, err = h.r.route(context.Background(), cc); err != nil || auth != nil || cc.TLSConfig.VerifyConnection != nil {
		t.Errorf("Route after NamesUntil: err %v, auth hosts %q; want plain", err, auth)
	}
}

func TestNamesRollbackKeepsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	inProgress(h)
	h.advance(time.Second)
	h.status[meta.RoleTarget] = meta.StatusAvailable // green reports an earlier phase: a rollback
	h.pollBoth()
	h.poll(meta.RoleTarget) // the second read confirms it
	st := h.r.Status()
	if st.LastSummary == nil || st.LastSummary.Outcome != bluegreen.OutcomeRolledBack || len(st.Routing.Names) != 0 {
		t.Errorf("after a rollback: summary %+v, names %+v; want rolled back and no names", st.LastSummary, st.Routing.Names)
	}
}

// TestMonitorIdentity: a monitor's connect gets the identity of the server
// at its start address, and the other name first after a refused token.
func TestMonitorIdentity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, bluegreen.Config{})
	var got []string
	connect := h.r.identifyMonitor(func(_ context.Context, _ *pgx.ConnConfig, auth []string) error {
		got = auth
		return nil
	})
	inPost(h)
	for _, tt := range []struct {
		host string
		want []string
	}{
		{greenC, []string{greenC, blueC}}, // green answers to the green name until the rename
		{blueC, []string{blueC, oldC}},    // the blue monitor reads old blue at its start address
	} {
		if err := connect(context.Background(), verifyFullConfig(t, tt.host)); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("monitor on %s: auth %q (%v), want %q", tt.host, got, err, tt.want)
		}
	}
	// The green monitor's token was refused: its next connect tries the
	// blue name first.
	h.r.report(failedPoll(h, meta.RoleTarget), bluegreen.MonitorStatus{Role: meta.RoleTarget.String(), Host: greenC})
	if _ = connect(context.Background(), verifyFullConfig(t, greenC)); !slices.Equal(got, []string{blueC, greenC}) {
		t.Errorf("green monitor after a refused token: auth %q, want the blue name first", got)
	}
}

// failedPoll is a poll of role whose connect was refused with 28000.
func failedPoll(h *harness, role meta.Role) switchover.Observation {
	gen, _ := h.r.generation()
	return switchover.Observation{Role: role, Gen: gen, Kind: switchover.KindNoConn,
		Err: &pgconn.PgError{Severity: "FATAL", Code: "28000", Message: "PAM authentication failed"}}
}

// verifyFullConfig is a connection config for host with
// sslmode=verify-full, as pgx parses it.
func verifyFullConfig(t *testing.T, host string) *pgx.ConnConfig {
	t.Helper()
	cc, err := pgx.ParseConfig("postgres://u@" + host + ":5432/db?sslmode=verify-full")
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// TestAcceptNames checks the certificate verification of a substituted
// connection: valid for the name asked for or any counterpart, always with
// the whole chain verified; a name outside the list, another CA, an
// expired certificate or a client certificate fail.
func TestAcceptNames(t *testing.T) {
	t.Parallel()
	ca, caKey := newCA(t)
	other, otherKey := newCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	now := time.Now()
	base := &tls.Config{RootCAs: roots, ServerName: blueC}
	rc, engine := mustDefaults(t, bluegreen.Config{})
	r := newRouter(rc, engine, verifyFullConfig(t, blueC), time.Now)
	tests := []struct {
		name    string
		leaf    *x509.Certificate
		aliased bool
		wantErr bool
	}{
		{"valid for the name asked for", leafFor(t, ca, caKey, []string{blueC}, now, x509.ExtKeyUsageServerAuth), false, false},
		{"valid for the green counterpart", leafFor(t, ca, caKey, []string{greenC, greenI}, now, x509.ExtKeyUsageServerAuth), true, false},
		{"wildcard for the counterpart", leafFor(t, ca, caKey, []string{"*.cluster-x1.us-east-1.rds.amazonaws.com"}, now, x509.ExtKeyUsageServerAuth), false, false},
		{"valid for another name", leafFor(t, ca, caKey, []string{"evil.example.com"}, now, x509.ExtKeyUsageServerAuth), false, true},
		{"another CA", leafFor(t, other, otherKey, []string{greenC}, now, x509.ExtKeyUsageServerAuth), false, true},
		{"expired", leafFor(t, ca, caKey, []string{greenC}, now.Add(-48*time.Hour), x509.ExtKeyUsageServerAuth), false, true},
		{"a client certificate", leafFor(t, ca, caKey, []string{greenC}, now, x509.ExtKeyUsageClientAuth), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base.Clone()
			r.acceptNames(c, []string{blueC, greenC})
			if !c.InsecureSkipVerify || c.VerifyConnection == nil || c.ServerName != blueC {
				t.Fatal("acceptNames must leave the verification to VerifyConnection, for the name asked for")
			}
			before := r.aliasedCerts.Load()
			err := c.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{tt.leaf}})
			if (err != nil) != tt.wantErr {
				t.Errorf("VerifyConnection: %v, want error %v", err, tt.wantErr)
			}
			if got := r.aliasedCerts.Load() - before; (got == 1) != tt.aliased {
				t.Errorf("aliased %d, want aliased %v", got, tt.aliased)
			}
		})
	}
	// Nothing to change: no name verified, or nothing but the name asked for.
	r.acceptNames(nil, []string{blueC, greenC})
	for _, c := range []*tls.Config{{InsecureSkipVerify: true, ServerName: blueC}, {ServerName: ""}, base.Clone()} {
		names := []string{blueC, greenC}
		if c.ServerName == blueC && !c.InsecureSkipVerify {
			names = []string{blueC}
		}
		r.acceptNames(c, names)
		if c.VerifyConnection != nil {
			t.Errorf("acceptNames(%+v, %q) changed a config it had nothing to add to", c, names)
		}
	}
	// The user's own VerifyConnection still runs, after ours.
	userErr := errors.New("user check")
	c := base.Clone()
	c.VerifyConnection = func(tls.ConnectionState) error { return userErr }
	r.acceptNames(c, []string{blueC, greenC})
	if err := c.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{tests[1].leaf}}); !errors.Is(err, userErr) {
		t.Errorf("user's VerifyConnection: %v, want it run", err)
	}
}

// mustDefaults returns c with its defaults, and the metadata it selects.
func mustDefaults(t *testing.T, c bluegreen.Config) (bluegreen.Config, meta.Engine) {
	t.Helper()
	c, engine, err := withDefaults(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, engine
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func leafFor(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, from time.Time, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: from.Add(-time.Hour), NotAfter: from.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestAcceptNamesOutsideDomain: a name outside the deployment's domain
// (the account and Region suffix of the pool's hosts) is never accepted in
// a certificate, even when the routing lists it (a metadata row named
// it): a TLS handshake with sslmode=verify-full against a listener with a
// valid certificate for that name, from a CA the client trusts, fails,
// and the listener gets no password. The names inside the domain still
// are. Before the fix (checked on main) the connection went through to
// the listener's password prompt, which recorded the password.
func TestAcceptNamesOutsideDomain(t *testing.T) {
	t.Parallel()
	const evil = "db-green-abc123.cluster-x1.us-east-1.rds.attacker.example"
	tr, err := pgtest.StartTrap(pgtest.TrapConfig{Names: []string{evil, greenC}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}()
	rc, engine := mustDefaults(t, bluegreen.Config{})
	r := newRouter(rc, engine, verifyFullConfig(t, blueC), time.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := func(names []string) error {
		cc := verifyFullConfig(t, blueC)
		cc.Password = "pool-secret"
		cc.LookupFunc = func(context.Context, string) ([]string, error) { return []string{tr.Addr()}, nil }
		tr.Trust(cc)
		r.acceptNames(cc.TLSConfig, names)
		c, err := pgx.ConnectConfig(ctx, cc)
		if err == nil {
			c.Close(ctx)
		}
		return err
	}
	if err := connect([]string{blueC, evil}); err == nil {
		t.Error("connected")
	}
	if l := tr.Logins(); len(l) != 0 {
		t.Errorf("a certificate for %s was accepted for %s: the listener got %+v", evil, blueC, l)
	}
	// The test's own check: a name inside the domain is accepted (the
	// listener's certificate names green's cluster endpoint too).
	var pe *pgconn.PgError
	if err := connect([]string{blueC, greenC}); !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("a counterpart inside the domain: %v, want the listener's 28P01", err)
	}
	if l := tr.Logins(); len(l) != 1 || l[0].Password != "pool-secret" {
		t.Errorf("logins %+v, want one, with the password", l)
	}
	// And VerifyConnection alone, as in TestAcceptNames.
	ca, caKey := newCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	c := &tls.Config{RootCAs: roots, ServerName: blueC}
	r.acceptNames(c, []string{blueC, evil})
	leaf := leafFor(t, ca, caKey, []string{evil}, time.Now(), x509.ExtKeyUsageServerAuth)
	if c.VerifyConnection != nil {
		if err := c.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); err == nil {
			t.Error("a certificate valid only for a name outside the domain was accepted")
		}
	} else if c.InsecureSkipVerify {
		t.Error("acceptNames turned verification off without taking it over")
	}
}
