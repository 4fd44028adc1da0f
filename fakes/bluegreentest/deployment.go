package bluegreentest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DeploymentConfig configures [Env.NewDeployment]. The zero value makes an
// Aurora deployment named "bgN" (N counting the Env's deployments).
type DeploymentConfig struct {
	// Name is the cluster (Aurora) or instance (RDS) name, which also names
	// the database ("bg_" + Name with dashes as underscores). Lowercase
	// letters, digits and dashes. Default "bgN".
	Name string
	// Engine selects the metadata function and the names. Default Aurora.
	Engine Engine
	// Readers is the number of reader instances of each side (Aurora only,
	// at most MaxReaders): orders-2, orders-3, … in the topology
	// (aurora_replica_status()), the metadata unless ClusterEndpointsOnly,
	// and the resolver, each at an address of its own
	// ([Server.ReaderAddr]: the side's server, reached at another
	// address). The reader cluster endpoint resolves to the first reader.
	// Default 0: the writer instance only.
	Readers int
	// ClusterEndpointsOnly makes the metadata list only the cluster
	// endpoints (Aurora): the instances are then known from the topology
	// alone, as on a deployment whose metadata does not name them.
	ClusterEndpointsOnly bool
}

// Deployment is one blue/green deployment in an [Env]: its own database
// on both servers, holding the metadata function and control table, and
// its RDS-shaped names in the Env's resolver (blue names → the blue
// server, green names → the green server).
//
// Its methods move the deployment through a switchover by writing the
// metadata on both servers and changing DNS, step by step, as RDS does:
//
//	d.SetStatus(ctx, StatusAvailable)      // CREATED
//	d.SetStatus(ctx, StatusInitiated)      // PREPARATION
//	d.SetStatus(ctx, StatusInProgress)     // IN_PROGRESS
//	d.SetStatus(ctx, StatusPostProcessing) // POST
//	d.Rename(ctx)                          // green takes the blue names, old blue the -old1 names
//	d.SwapDNS()                            // blue names → green server, -old1 names → blue server
//	d.RemoveGreenDNS()                     // the green names stop resolving
//	d.SetStatus(ctx, StatusCompleted)      // COMPLETED
//	d.DropSource(ctx)                      // the SOURCE rows disappear
//
// A Deployment is safe for concurrent use; its writes are serialized.
type Deployment struct {
	Env      *Env
	Name     string
	Engine   Engine
	Database string
	Names    Names
	// Readers and ClusterEndpointsOnly are those of the DeploymentConfig.
	Readers              int
	ClusterEndpointsOnly bool
	// Blue and Green are the metadata of the deployment's database on each
	// server, for writes that differ between the two (by default every
	// write goes to both).
	Blue, Green *Metadata

	mu      sync.Mutex
	status  string
	renamed bool
	noSrc   bool
	frozen  bool // blue's metadata is no longer written (FreezeBlue)

	// The servers' identities, read by their front ends (Config.IAM,
	// Config.NodeCerts): the servers answer to their new names once
	// switched, and carry them in their certificates once renewed.
	switched, renewed atomic.Bool
}

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,40}$`)

// NewDeployment creates a deployment: its database on both servers, the
// metadata function and control table in each (empty: NOT_CREATED), and
// its blue and green names in the resolver.
func (e *Env) NewDeployment(ctx context.Context, cfg DeploymentConfig) (*Deployment, error) {
	if cfg.Engine == 0 {
		cfg.Engine = Aurora
	}
	if cfg.Engine != Aurora && cfg.Engine != RDS {
		return nil, fmt.Errorf("fakes/bluegreentest: unknown engine %v", cfg.Engine)
	}
	e.mu.Lock()
	e.seq++
	if cfg.Name == "" {
		cfg.Name = "bg" + strconv.Itoa(e.seq)
	}
	e.mu.Unlock()
	if !validName.MatchString(cfg.Name) {
		return nil, fmt.Errorf("fakes/bluegreentest: invalid deployment name %q: lowercase letters, digits and dashes", cfg.Name)
	}
	if cfg.Readers < 0 || cfg.Readers > MaxReaders || cfg.Readers > 0 && cfg.Engine != Aurora {
		return nil, fmt.Errorf("fakes/bluegreentest: %d readers: 0 to %d, Aurora only", cfg.Readers, MaxReaders)
	}
	for i := 1; i <= cfg.Readers; i++ {
		for _, s := range []*Server{e.Blue, e.Green} {
			if a := s.ReaderAddr(i); a == "" || a == e.Blue.Host || a == e.Green.Host {
				return nil, fmt.Errorf("fakes/bluegreentest: no address for reader %d of %s (%s)", i, s.Name, s.Host)
			}
		}
	}
	d := &Deployment{
		Env:                  e,
		Name:                 cfg.Name,
		Engine:               cfg.Engine,
		Database:             "bg_" + regexp.MustCompile(`-`).ReplaceAllString(cfg.Name, "_"),
		Names:                e.Names(cfg.Engine, cfg.Name).withReaders(cfg.Readers),
		Readers:              cfg.Readers,
		ClusterEndpointsOnly: cfg.ClusterEndpointsOnly && cfg.Engine == Aurora,
	}
	var wg sync.WaitGroup
	var errs [2]error
	var md [2]*Metadata
	for i, s := range []*Server{e.Blue, e.Green} {
		wg.Go(func() {
			if errs[i] = s.Exec(ctx, "postgres", "CREATE DATABASE "+d.Database); errs[i] != nil {
				return
			}
			md[i], errs[i] = Install(ctx, s.DSN(d.Database), cfg.Engine)
		})
	}
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return nil, err
	}
	d.Blue, d.Green = md[0], md[1]
	if err := d.writeTopology(ctx); err != nil {
		return nil, err
	}
	d.ResetDNS()
	e.mu.Lock()
	if e.deps == nil {
		e.deps = map[*Deployment]bool{}
	}
	e.deps[d] = true
	e.mu.Unlock()
	return d, nil
}

// answers returns the names of d that s answers to now (cert false), or
// that its certificate carries (cert true): blue's names on blue and
// green's on green, then, once renamed (renewed), the -old1 names on blue
// and the blue names on green.
func (d *Deployment) answers(s *Server, cert bool) []string {
	moved := d.switched.Load()
	if cert {
		moved = d.renewed.Load()
	}
	switch {
	case s == d.Env.Blue && moved:
		return d.Names.Old()
	case s == d.Env.Blue:
		return d.Names.Blue()
	case moved:
		return d.Names.Blue()
	}
	return d.Names.Green()
}

// DSN returns a connection string to the deployment's database through
// host name host (one of Names), on the port clients see (Server.Port):
// with sslmode=verify-full and the Env's CA when TLS is on, else
// sslmode=disable. extra are more "key=value" settings. Connect with the
// Env's resolver as LookupFunc and [Env.Dial] as DialFunc, as
// [Deployment.PoolConfig] does.
func (d *Deployment) DSN(host string, extra ...string) string {
	q := url.Values{}
	if d.Env.CAFile != "" {
		q.Set("sslmode", "verify-full")
		q.Set("sslrootcert", d.Env.CAFile)
	} else {
		q.Set("sslmode", "disable")
	}
	return pgurl.Superuser(net.JoinHostPort(host, strconv.Itoa(d.Env.Blue.Port)), d.Database, q.Encode(), extra...)
}

// PoolConfig parses d.DSN(host, extra...) and sets its LookupFunc to the
// Env's resolver and its DialFunc to [Env.Dial].
func (d *Deployment) PoolConfig(host string, extra ...string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(d.DSN(host, extra...))
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.LookupFunc = d.Env.Resolver.Lookup
	cfg.ConnConfig.DialFunc = d.Env.Dial
	return cfg, nil
}

// Rows returns the rows the deployment's metadata has for status now:
// SOURCE rows for the blue names and TARGET rows for the green names;
// after Rename, SOURCE rows for the -old1 names and TARGET rows for the
// blue names; after DropSource, no SOURCE rows. The names are the cluster
// endpoint and the instances (Aurora), or only the cluster endpoint
// (ClusterEndpointsOnly), or the instance (RDS).
func (d *Deployment) Rows(status string) []Row {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rowsLocked(status)
}

func (d *Deployment) rowsLocked(status string) []Row {
	port := d.Env.Blue.Port
	n := d.Names
	pick := func(cluster, instance string, readers []string) []string {
		if d.ClusterEndpointsOnly {
			return []string{cluster}
		}
		return append([]string{cluster, instance}, readers...)
	}
	src, dst := pick(n.Cluster, n.Instance, n.ReaderInstances), pick(n.GreenCluster, n.GreenInstance, n.GreenReaderInstances)
	if d.renamed {
		src, dst = pick(n.OldCluster, n.OldInstance, n.OldReaderInstances), pick(n.Cluster, n.Instance, n.ReaderInstances)
	}
	var rows []Row
	add := func(role string, hosts []string) {
		for _, h := range hosts {
			if h != "" {
				rows = append(rows, Row{Endpoint: h, Port: port, Role: role, Status: status})
			}
		}
	}
	if !d.noSrc {
		add(RowRoleSource, src)
	}
	add(RowRoleTarget, dst)
	return rows
}

// write sets the rows for the current state on both servers.
func (d *Deployment) write(ctx context.Context) error {
	var rows []Row
	if d.status != "" {
		rows = d.rowsLocked(d.status)
	}
	var wg sync.WaitGroup
	var errs [2]error
	for i, m := range []*Metadata{d.Blue, d.Green} {
		if i == 0 && d.frozen {
			continue
		}
		wg.Go(func() { errs[i] = m.SetRows(ctx, rows...) })
	}
	wg.Wait()
	return errors.Join(errs[0], errs[1])
}

// FreezeBlue stops writing blue's metadata: old blue keeps showing what it
// shows now while green's goes on (ScenarioFrozenBlue). ResetDNS does not
// undo it; a new Deployment starts unfrozen.
func (d *Deployment) FreezeBlue() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.frozen = true
}

// SetStatus writes status into every row, on both servers ("" empties the
// metadata, as before a deployment exists).
func (d *Deployment) SetStatus(ctx context.Context, status string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status = status
	return d.write(ctx)
}

// Status returns the status last written.
func (d *Deployment) Status() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status
}

// Rename renames the servers, as RDS does some seconds into POST: green
// answers to the blue names and old blue to the -old1 names (an IAM token
// must be signed for them: Config.IAM), and the metadata says so: the
// TARGET rows now carry the blue names and the SOURCE rows the -old1
// names ("Green topology changed" for a client). The topology follows:
// green's instances take the blue identifiers, old blue's the -old1 ones,
// and so does each server's aurora_db_instance_identifier() (green answers
// the blue writer's identifier, old blue its -old1 form).
// The servers' certificates follow later ([Deployment.RenewCertificates]).
func (d *Deployment) Rename(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.renamed = true
	d.switched.Store(true)
	return errors.Join(d.write(ctx), d.writeTopology(ctx))
}

// writeTopology sets each server's aurora_replica_status() (Aurora): its
// side's writer and readers, by their current identifiers; and its
// aurora_db_instance_identifier(): its side's writer's identifier (the
// server is that instance; its readers share it, see [InstanceIDFunction]).
func (d *Deployment) writeTopology(ctx context.Context) error {
	if d.Engine != Aurora {
		return nil
	}
	n := d.Names
	replicas := func(writer string, readers []string) []Replica {
		out := []Replica{{ServerID: serverID(writer), Writer: true}}
		for _, r := range readers {
			out = append(out, Replica{ServerID: serverID(r)})
		}
		return out
	}
	blue, green := replicas(n.Instance, n.ReaderInstances), replicas(n.GreenInstance, n.GreenReaderInstances)
	if d.renamed {
		blue, green = replicas(n.OldInstance, n.OldReaderInstances), replicas(n.Instance, n.ReaderInstances)
	}
	var wg sync.WaitGroup
	var errs [2]error
	wg.Go(func() { errs[0] = d.Blue.setSelf(ctx, blue) })
	wg.Go(func() { errs[1] = d.Green.setSelf(ctx, green) })
	wg.Wait()
	return errors.Join(errs[0], errs[1])
}

// RenameServers renames the servers as Rename does, without the metadata
// showing it yet: green answers to the blue names and old blue to the
// -old1 names (Config.IAM), while the TARGET rows still carry the green
// names. It stages the moment between the rename and the metadata (or a
// client's next poll of it), when a client that goes by the metadata
// still signs its tokens for the green names. Rename does both.
func (d *Deployment) RenameServers() { d.switched.Store(true) }

// RenewCertificates gives the servers certificates for the names they
// answer to since [Deployment.Rename], as RDS regenerates node
// certificates some time after the rename, sometimes after
// SWITCHOVER_COMPLETED: green's carries the blue names, old blue's the
// -old1 names. It matters with Config.NodeCerts, where each server
// presents a certificate for its own names.
func (d *Deployment) RenewCertificates() { d.renewed.Store(true) }

// DropSource removes the SOURCE rows, as RDS does at COMPLETED.
func (d *Deployment) DropSource(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noSrc = true
	return d.write(ctx)
}

// ResetDNS points the blue names at the blue server and the green names at
// the green server (reader instances at their reader addresses, the
// reader cluster endpoint at the first reader), and removes the -old1
// names.
func (d *Deployment) ResetDNS() {
	r := d.Env.Resolver
	set(r, d.Names.Blue(), d.addrs(d.Env.Blue))
	set(r, d.Names.Green(), d.addrs(d.Env.Green))
	for _, h := range d.Names.Old() {
		r.Remove(h)
	}
}

// SwapDNS points the blue names at the green server and the -old1 names at
// the blue server ("Blue DNS updated" for a client): each name at the
// address its green (or old blue) counterpart had.
func (d *Deployment) SwapDNS() {
	r := d.Env.Resolver
	set(r, d.Names.Blue(), d.addrs(d.Env.Green))
	set(r, d.Names.Old(), d.addrs(d.Env.Blue))
}

// addrs returns the addresses of a side's names on server s, in the order
// of Names.Blue: the server for the cluster and writer instance endpoints,
// the first reader for the reader cluster endpoint, each reader's own.
func (d *Deployment) addrs(s *Server) []string {
	if d.Engine != Aurora {
		return []string{s.Host}
	}
	reader := s.Host
	if d.Readers > 0 {
		reader = s.ReaderAddr(1)
	}
	out := []string{s.Host, reader, s.Host}
	for i := 1; i <= d.Readers; i++ {
		out = append(out, s.ReaderAddr(i))
	}
	return out
}

func set(r *Resolver, names, addrs []string) {
	for i, h := range names {
		r.Set(h, addrs[i])
	}
}

// RemoveGreenDNS removes the green names ("Green DNS removed" for a
// client).
func (d *Deployment) RemoveGreenDNS() {
	for _, h := range d.Names.Green() {
		d.Env.Resolver.Remove(h)
	}
}

// Drop drops the deployment's database on both servers, closing its
// sessions, and removes its names from the resolver.
func (d *Deployment) Drop(ctx context.Context) error {
	var errs []error
	for _, s := range []*Server{d.Env.Blue, d.Env.Green} {
		errs = append(errs, s.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+d.Database+" WITH (FORCE)"))
	}
	for _, h := range append(append(d.Names.Blue(), d.Names.Green()...), d.Names.Old()...) {
		d.Env.Resolver.Remove(h)
	}
	d.Env.mu.Lock()
	delete(d.Env.deps, d)
	d.Env.mu.Unlock()
	return errors.Join(errs...)
}
