package cloudsqltest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

// Switch is what one of [Server.Failover], [Server.Maintenance] and
// [Server.Switchover] did, and when.
type Switch struct {
	// From and To are the instance connection names before and after: the
	// same instance for an HA failover and a maintenance, the old and the
	// new primary for a switchover.
	From, To string
	// Cut is when the instance dropped its connections and started to
	// refuse new ones; for a switchover, when it started.
	Cut time.Time
	// Accepting is when the instance accepted connections again; for a
	// switchover, when the write endpoint named the new primary.
	Accepting time.Time
	// Dropped counts the connections ended at the cut.
	Dropped int
}

// Failover plays a Cloud SQL HA failover: the standby takes over the
// instance's IP address, with every committed row (Cloud SQL's standby
// shares the primary's regional disk). At once, every connection the
// instance is forwarding ends (the client with a TCP reset; PostgreSQL
// rolls back what was in flight) and new connections are refused
// (ECONNREFUSED). Then takeOver, when set, runs: the standby taking over,
// for example a crash and restart of the PostgreSQL behind the instance
// ([pgtest.Server.Shutdown] "immediate", then Restart: crash recovery
// keeps every committed row), or any change of [Config].Backend's server.
// The instance accepts connections again once takeOver has returned and
// downtime has passed since the cut, whichever is later. Failover returns
// then, or when ctx ends (the instance accepts again in every case), with
// takeOver's error or ctx's.
//
// [pgtest.Server.Shutdown]: https://pkg.go.dev/github.com/holdfast-db/holdfast/fakes/pgtest#Server.Shutdown
func (s *Server) Failover(ctx context.Context, downtime time.Duration, takeOver func(context.Context) error) (Switch, error) {
	sw := Switch{From: s.connName, To: s.connName}
	s.inst.SetDown(true)
	sw.Cut = time.Now()
	sw.Dropped = s.inst.Cut()
	var err error
	if takeOver != nil {
		err = takeOver(ctx)
	}
	if err == nil {
		err = wait(ctx, time.Until(sw.Cut.Add(downtime)))
	}
	s.inst.SetDown(false)
	sw.Accepting = time.Now()
	return sw, err
}

// Maintenance plays the maintenance of a Cloud SQL Enterprise Plus
// instance ("near-zero downtime", under a second): the instance's
// connections end and new ones are refused for cut, then it accepts
// again, on the same PostgreSQL. It is Failover(ctx, cut, nil).
func (s *Server) Maintenance(ctx context.Context, cut time.Duration) (Switch, error) {
	return s.Failover(ctx, cut, nil)
}

// Switchover plays an advanced DR switchover of a Server with a DR
// replica ([Config].DRBackend): promote, when set, switches the
// PostgreSQL servers' roles (for example fakes/outagetest's Pair.Demote
// with Hold: the old primary stops, its last WAL reaches the replica,
// which is promoted, and the old primary comes back as a read-only
// standby), then the write endpoint ([Server.WriteEndpoint]) names the
// other instance. Neither instance drops connections: the connector
// closes those to the old primary when it sees the name move, at its next
// check (cloudsqlconn.WithFailoverPeriod), and dials the new primary from
// then on. A second Switchover switches back. It returns promote's error,
// without moving the name, or an error for a Server without a DR replica.
func (s *Server) Switchover(ctx context.Context, promote func(context.Context) error) (Switch, error) {
	if s.zone == nil {
		return Switch{}, errors.New("fakes/cloudsqltest: Switchover: the Server has no DR replica (Config.DRBackend)")
	}
	s.mu.Lock()
	drPrimary := s.drPrimary
	s.mu.Unlock()
	sw := Switch{From: s.connName, To: s.drName, Cut: time.Now()}
	to := instanceDNSName(s.cfg.Project, s.cfg.DRRegion, s.cfg.DRInstance)
	if drPrimary {
		sw.From, sw.To = sw.To, sw.From
		to = instanceDNSName(s.cfg.Project, s.cfg.Region, s.cfg.Instance)
	}
	if promote != nil {
		if err := promote(ctx); err != nil {
			return sw, err
		}
	}
	s.mu.Lock()
	s.drPrimary = !drPrimary
	s.mu.Unlock()
	s.zone.point(to)
	sw.Accepting = time.Now()
	return sw, nil
}

// WriteEndpoint returns the DNS name of the write endpoint of a Server
// with a DR replica ("weN.PROJECT.global.sql-psa.goog", N unique in the
// process, as Cloud SQL's global write endpoints look), and "" without one. Dial it with a
// dialer built with cloudsqlconn.WithDNSResolver (and a short
// WithFailoverPeriod in tests): the connector looks the name up (a
// CNAME to the primary's instance DNS name, which it resolves with the
// Admin API's resolveConnectSettings) on every dial, and checks it every
// failover period for the connections it has open.
//
// Until its check, the connector (v1.26.0) keeps the old instance's
// connection info, cached by the domain name, while its dials already look
// the name up to the new instance's address: they fail the TLS handshake
// (the new instance's certificate does not carry the old one's name), and
// the connector then drops the entry. The fake plays that as it comes.
//
// The connector resolves names with net.DefaultResolver, which no option
// replaces: while a Server with a DR replica is open, net.DefaultResolver
// uses Go's resolver (PreferGo) and every DNS query of the process is
// answered by the fake (NXDOMAIN for names it does not hold; /etc/hosts
// is read first). After the last such Server closes, queries go to the
// system's name servers again.
func (s *Server) WriteEndpoint() string {
	if s.zone == nil {
		return ""
	}
	return s.zone.endpoint
}

func (s *Server) startDR() error {
	cert, err := s.serverCA.KeyPair(s.cfg.Project+":"+s.cfg.DRInstance, nil)
	if err != nil {
		return err
	}
	tc := s.tlsConfig.Clone()
	tc.Certificates = []tls.Certificate{*cert}
	s.drName = s.cfg.Project + ":" + s.cfg.DRRegion + ":" + s.cfg.DRInstance
	s.dr, err = gcpfake.StartInstance(s.life, gcpfake.InstanceConfig{
		TLS: tc, Backend: s.cfg.DRBackend, IP: DRInstanceIP, Port: "3307",
		ErrClosed: ErrClosed, ErrNotInstance: ErrNotInstance,
	})
	if err != nil {
		return err
	}
	primary := instanceDNSName(s.cfg.Project, s.cfg.Region, s.cfg.Instance)
	s.zone = &zone{
		endpoint: fmt.Sprintf("we%d.%s.global.sql-psa.goog", endpointIDs.Add(1), s.cfg.Project),
		ips: map[string]string{
			primary: InstanceIP,
			instanceDNSName(s.cfg.Project, s.cfg.DRRegion, s.cfg.DRInstance): DRInstanceIP,
		},
		target: primary,
	}
	addZone(s.zone)
	return nil
}

// endpointIDs numbers the write endpoints of the process's Servers: the
// fake DNS answers for all of them at once.
var endpointIDs atomic.Int64

func (s *Server) closeDR() {
	if s.dr != nil {
		s.dr.Close()
		removeZone(s.zone)
	}
}

// wait waits d or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
