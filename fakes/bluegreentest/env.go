package bluegreentest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
)

// Default addresses of the two servers: distinct loopback addresses, as
// blue and green are distinct instances.
const (
	DefaultBlueHost  = "127.0.0.11"
	DefaultGreenHost = "127.0.0.21"
)

// EnvSingleIP is the environment variable that, set to "1", makes [Start]
// use the single-address mode even where BlueHost and GreenHost can be
// bound, as Config.SingleIP does: to test, on Linux, what runs on macOS.
const EnvSingleIP = "HOLDFAST_SIM_SINGLE_IP"

// AliasHelp tells how to give the loopback interface the default addresses,
// so that [Start] can use the two-address mode. Linux needs nothing: every
// 127.x.y.z address is already local there.
const AliasHelp = "macOS: sudo ifconfig lo0 alias 127.0.0.11 up; sudo ifconfig lo0 alias 127.0.0.21 up"

// ErrNotFound is matched (errors.Is) by the error of [Start] when the
// PostgreSQL server binaries are not installed; tests usually skip then.
var ErrNotFound = pgtest.ErrNotFound

// Config configures [Start]. The zero value starts two servers without TLS
// on DefaultBlueHost and DefaultGreenHost.
type Config struct {
	// BlueHost and GreenHost are the servers' loopback addresses (any
	// 127.x.y.z on Linux). Defaults DefaultBlueHost, DefaultGreenHost.
	BlueHost, GreenHost string
	// TLS enables TLS on both servers with a certificate, issued by a
	// throwaway CA, for the RDS-shaped names of Account and Region
	// (wildcards; no IP address), so that sslmode=verify-full works with the
	// host names and fails with the addresses. Env.CAFile is the CA.
	TLS bool
	// NodeCerts gives each server, instead of the wildcards, a certificate
	// of its own for the names it answers to, as RDS gives each instance:
	// the blue names of every deployment on blue, the green names on green.
	// A switchover renews them some time after the rename
	// ([Deployment.RenewCertificates], Timings.Certificates): from then on
	// green's certificate carries the blue names and old blue's the -old1
	// names. Clients reach the servers through a front end
	// that presents them ([Env.Dial]). Needs TLS.
	NodeCerts bool
	// IAM makes the servers authenticate every user but the superuser as
	// RDS IAM authentication does: the password must be a token of the
	// form rdsiam mints (a SigV4-presigned "connect" URL; [IAMToken] makes
	// one) for that user, in Region, unexpired, and signed for a name the
	// server answers to at that moment, as RDS checks it: the blue names
	// on blue and the green names on green, until a switchover renames
	// them ([Deployment.Rename]): then the -old1 names on old blue and the
	// blue names on green. Anything else is refused with SQLSTATE 28000
	// "PAM authentication failed for user". The signature is not checked
	// (the simulator has no AWS credentials to check it with). Clients
	// reach the servers through a front end that checks the token
	// ([Env.Dial]).
	IAM bool
	// Account and Region shape the host names (see [NewNames]) and the
	// certificate. Defaults DefaultAccount, DefaultRegion.
	Account, Region string
	// Settings are extra postgresql.conf settings for both servers, for
	// example {"wal_level": "logical"}.
	Settings map[string]string
	// SingleIP selects the single-address mode (see [Env.SingleIP]) even
	// where BlueHost and GreenHost can be bound. Setting the environment
	// variable EnvSingleIP to "1" does the same.
	SingleIP bool
}

// Env is a blue and a green PostgreSQL server on one machine, on the same
// port at two loopback addresses, with a fake DNS. Deployments
// ([Env.NewDeployment]) live in their own databases, so tests can share an
// Env and run in parallel. Close it when done. An Env is safe for
// concurrent use.
//
// Clients connect through [Env.Dial] (Deployment.PoolConfig sets it), which
// works in both of the Env's modes:
//
//   - Two addresses, where BlueHost and GreenHost can be bound (any Linux):
//     the servers listen on them, on the same port, and Dial is a plain
//     dialer.
//   - Single address ([Env.SingleIP]), where they cannot (macOS unless the
//     loopback interface has aliases, see [AliasHelp]): both servers listen
//     on 127.0.0.1, each on a port of its own. Server.Host and Server.Port
//     stay what clients see, the two addresses on one port, and Dial
//     connects those to the listening servers; its connections report the
//     address asked for as their remote address. The resolver, the metadata
//     and holdfast see the same topology as in the other mode.
type Env struct {
	Blue, Green *Server
	// Resolver is the fake DNS every deployment's names are set in.
	Resolver *Resolver
	// CAFile is the path of the CA certificate (PEM) when Config.TLS is set:
	// use it as sslrootcert.
	CAFile string
	// SingleIP reports the single-address mode; SingleIPReason says why it
	// is in force (the error binding BlueHost or GreenHost, or the option).
	SingleIP       bool
	SingleIPReason string

	cfg Config
	dir string           // client-side files (the CA)
	ca  *certs.Authority // with TLS

	mu   sync.Mutex
	seq  int
	deps map[*Deployment]bool // live deployments, whose names the servers answer to
}

// Server is one of the two servers. Its superuser is "postgres", with
// trust authentication on loopback.
type Server struct {
	Name string // "blue" or "green"
	// Host and Port are the server's address as clients see it: what the
	// resolver answers for its names and the metadata publishes. Blue and
	// green differ by Host and share Port. Reach it through [Env.Dial].
	Host string
	Port int
	// ListenAddr is where the server listens ("host:port"): Host and Port,
	// except in the single-address mode, where it is 127.0.0.1 and a port
	// of its own.
	ListenAddr string
	Dir        string // the server's directory (data directory, log, TLS files)
	tls        bool
	srv        *pgtest.Server
	front      *frontend // with Config.NodeCerts or Config.IAM
}

// DSN returns a superuser connection string for database db on this
// server, by its listen address, without TLS. It needs no special dialer.
func (s *Server) DSN(db string) string {
	return pgurl.Superuser(s.ListenAddr, db, "sslmode=disable")
}

// Exec runs sql (several statements, no parameters) in database db as the
// superuser.
func (s *Server) Exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return fmt.Errorf("fakes/bluegreentest: %s: %w", s.Name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("fakes/bluegreentest: %s: %w", s.Name, err)
	}
	return nil
}

// Start starts the two servers (initdb and pg_ctl, through the
// PostgreSQL binaries installed on the machine): on the same free port at
// BlueHost and GreenHost when both can be bound, else in the single-address
// mode (see [Env]). ctx bounds the start. When the binaries are missing the
// error matches ErrNotFound.
func Start(ctx context.Context, cfg Config) (*Env, error) {
	if cfg.BlueHost == "" {
		cfg.BlueHost = DefaultBlueHost
	}
	if cfg.GreenHost == "" {
		cfg.GreenHost = DefaultGreenHost
	}
	if cfg.BlueHost == cfg.GreenHost {
		return nil, errors.New("fakes/bluegreentest: BlueHost and GreenHost must differ")
	}
	if cfg.Account == "" {
		cfg.Account = DefaultAccount
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.NodeCerts && !cfg.TLS {
		return nil, errors.New("fakes/bluegreentest: NodeCerts needs TLS")
	}
	for _, h := range []string{cfg.BlueHost, cfg.GreenHost} {
		if ip := net.ParseIP(h); ip == nil || ip.To4() == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("fakes/bluegreentest: %q is not an IPv4 loopback address", h)
		}
	}
	var reason string
	switch {
	case cfg.SingleIP:
		reason = "Config.SingleIP"
	case os.Getenv(EnvSingleIP) == "1":
		reason = EnvSingleIP + "=1"
	default:
		if err := canBind(cfg.BlueHost, cfg.GreenHost); err != nil {
			reason = err.Error()
		}
	}
	start := startPair
	if reason != "" {
		start = startSingle
	}
	var blue, green *pgtest.Server
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		blue, green, err = start(ctx, cfg)
		if err == nil || errors.Is(err, pgtest.ErrNotFound) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	// Clients see the configured addresses on one port: the servers' own
	// in the two-address mode, blue's real port in the single-address one
	// (nothing listens there at either address, so a client that bypasses
	// Dial is refused rather than reaching the wrong server).
	e := &Env{
		Blue: &Server{Name: "blue", Host: cfg.BlueHost, Port: blue.Port, ListenAddr: blue.Addr(),
			Dir: blue.Dir, srv: blue},
		Green: &Server{Name: "green", Host: cfg.GreenHost, Port: blue.Port, ListenAddr: green.Addr(),
			Dir: green.Dir, srv: green},
		Resolver:       NewResolver(),
		SingleIP:       reason != "",
		SingleIPReason: reason,
		cfg:            cfg,
	}
	if cfg.TLS {
		if err := e.enableTLS(ctx); err != nil {
			_ = e.Close()
			return nil, err
		}
	}
	if cfg.NodeCerts || cfg.IAM {
		for _, s := range []*Server{e.Blue, e.Green} {
			if s.front, err = startFrontend(e, s); err != nil {
				_ = e.Close()
				return nil, err
			}
		}
	}
	return e, nil
}

// startPair starts both servers at once on a port free on both addresses.
func startPair(ctx context.Context, cfg Config) (*pgtest.Server, *pgtest.Server, error) {
	port, err := sharedFreePort(cfg.BlueHost, cfg.GreenHost)
	if err != nil {
		return nil, nil, fmt.Errorf("fakes/bluegreentest: pick a port: %w", err)
	}
	return startTwo(ctx,
		pgtest.Options{Host: cfg.BlueHost, Port: port, Settings: cfg.Settings},
		pgtest.Options{Host: cfg.GreenHost, Port: port, Settings: cfg.Settings})
}

// startSingle starts both servers at once on 127.0.0.1, each on a free
// port of its own.
func startSingle(ctx context.Context, cfg Config) (*pgtest.Server, *pgtest.Server, error) {
	o := pgtest.Options{Host: "127.0.0.1", Settings: cfg.Settings}
	return startTwo(ctx, o, o)
}

// startTwo starts two servers at once; if either fails, it stops the
// other.
func startTwo(ctx context.Context, blue, green pgtest.Options) (*pgtest.Server, *pgtest.Server, error) {
	var wg sync.WaitGroup
	var srv [2]*pgtest.Server
	var errs [2]error
	for i, o := range []pgtest.Options{blue, green} {
		wg.Go(func() { srv[i], errs[i] = pgtest.Start(ctx, o) })
	}
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		for _, s := range srv {
			if s != nil {
				_ = s.Stop()
			}
		}
		return nil, nil, err
	}
	return srv[0], srv[1], nil
}

// canBind reports whether a TCP listener can be opened at each host.
func canBind(hosts ...string) error {
	for _, h := range hosts {
		l, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
		if err != nil {
			return err
		}
		l.Close()
	}
	return nil
}

// Dial is a pgconn.DialFunc (give it to pgx as ConnConfig.DialFunc) that
// connects to the servers by the addresses clients see, Server.Host and
// Server.Port, and their readers' ([Server.ReaderAddr]), in either mode,
// and to any other address as asked. In the
// single-address mode a connection to a server reports the address asked
// for as its RemoteAddr, as it would be with two addresses (pgx sends a
// cancel request there, through Dial again). With Config.NodeCerts or
// Config.IAM it connects to the server's front end, which presents the
// node certificate and checks the IAM token before it passes the
// connection on to the server, and the connection reports the address
// asked for too. Dial honours ctx.
func (e *Env) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c, ok, err := e.dialReader(ctx, network, addr); ok { // topology.go
		return c, err
	}
	var d net.Dialer // as pgx's default dialer
	for _, s := range []*Server{e.Blue, e.Green} {
		if !s.is(addr) || !e.SingleIP && s.front == nil {
			continue
		}
		target := s.ListenAddr
		if s.front != nil {
			target = s.front.addr()
		}
		c, err := d.DialContext(ctx, network, target)
		if err != nil {
			return nil, err
		}
		return &aliasConn{Conn: c, remote: &net.TCPAddr{IP: net.ParseIP(s.Host), Port: s.Port}}, nil
	}
	return d.DialContext(ctx, network, addr)
}

// is reports whether addr ("host:port") is the address clients see s at.
func (s *Server) is(addr string) bool {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || p != strconv.Itoa(s.Port) {
		return false
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.Equal(net.ParseIP(s.Host))
}

// aliasConn is a connection to a server reached at another address than
// the one asked for; it reports the address asked for.
type aliasConn struct {
	net.Conn
	remote net.Addr
}

func (c *aliasConn) RemoteAddr() net.Addr { return c.remote }

func sharedFreePort(a, b string) (int, error) {
	for range 20 {
		la, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
		if err != nil {
			return 0, err
		}
		port := la.Addr().(*net.TCPAddr).Port
		lb, err := net.Listen("tcp", net.JoinHostPort(b, strconv.Itoa(port)))
		la.Close()
		if err == nil {
			lb.Close()
			return port, nil
		}
	}
	return 0, errors.New("no port free on both addresses")
}

// Close stops both servers (and their front ends, closing the connections
// through them) and removes their files. It is idempotent.
func (e *Env) Close() error {
	e.Blue.front.close()
	e.Green.front.close()
	err := errors.Join(e.Blue.srv.Stop(), e.Green.srv.Stop())
	if e.dir != "" {
		err = errors.Join(err, os.RemoveAll(e.dir))
	}
	return err
}

// Config returns the configuration the Env was started with, defaults
// filled in.
func (e *Env) Config() Config {
	c := e.cfg
	c.Settings = maps.Clone(c.Settings)
	return c
}

// Names returns the names of deployment name for engine in this Env's
// account and region.
func (e *Env) Names(engine Engine, name string) Names {
	return NewNames(engine, name, e.cfg.Account, e.cfg.Region, "")
}

// enableTLS issues a certificate for the RDS-shaped names, writes it into
// each server's directory and turns TLS on with a configuration reload.
func (e *Env) enableTLS(ctx context.Context) error {
	var err error
	if e.ca, err = certs.New(); err != nil {
		return fmt.Errorf("fakes/bluegreentest: TLS certificates: %w", err)
	}
	certPEM, keyPEM, err := e.ca.Issue("server", Wildcards(e.cfg.Account, e.cfg.Region))
	if err != nil {
		return fmt.Errorf("fakes/bluegreentest: TLS certificates: %w", err)
	}
	caPEM := e.ca.CertPEM()
	if e.dir, err = os.MkdirTemp("", "holdfast-bluegreen-*"); err != nil {
		return err
	}
	e.CAFile = filepath.Join(e.dir, "ca.pem")
	if err := os.WriteFile(e.CAFile, caPEM, 0o644); err != nil {
		return err
	}
	for _, s := range []*Server{e.Blue, e.Green} {
		if err := s.enableTLS(ctx, certPEM, keyPEM); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) enableTLS(ctx context.Context, certPEM, keyPEM []byte) error {
	fi, err := os.Stat(s.Dir)
	if err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(s.Dir, "server.crt"), filepath.Join(s.Dir, "server.key")
	// The server runs as the owner of its directory (the "postgres" OS
	// user when the tests run as root) and insists on a key file it owns
	// with mode 0600.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{certFile, certPEM, 0o644}, {keyFile, keyPEM, 0o600}} {
		if err := os.WriteFile(f.name, f.data, f.mode); err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			if err := os.Chown(f.name, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
	}
	// ALTER SYSTEM runs outside a transaction: one statement at a time.
	for _, q := range []string{
		"ALTER SYSTEM SET ssl_cert_file = " + quote(certFile),
		"ALTER SYSTEM SET ssl_key_file = " + quote(keyFile),
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if err := s.Exec(ctx, "postgres", q); err != nil {
			return err
		}
	}
	s.tls = true
	// The reload is asynchronous: wait until a new connection gets TLS.
	dsn := pgurl.Superuser(s.ListenAddr, "postgres", "sslmode=require")
	delay := 5 * time.Millisecond
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			var on bool
			err = conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&on)
			conn.Close(context.Background())
			if err == nil && on {
				return nil
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fakes/bluegreentest: %s: TLS not enabled: %w (last: %v)", s.Name, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

func quote(s string) string { return "'" + s + "'" }
