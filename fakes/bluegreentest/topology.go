package bluegreentest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// TopologyFunction is Aurora PostgreSQL's topology function: one row per DB
// instance of the cluster, on every instance. [Install] creates it for the
// Aurora engine, fed from a control table as the metadata is.
const TopologyFunction = "pg_catalog.aurora_replica_status"

// WriterSessionID is the session_id of the writer's row in
// aurora_replica_status().
const WriterSessionID = "MASTER_SESSION_ID"

// InstanceIDFunction is Aurora PostgreSQL's function that names the DB
// instance a session is connected to: its DB instance identifier, the first
// label of its instance endpoint. [Install] creates it for the Aurora
// engine, fed from a control table of its own ([Metadata.SetInstanceID]).
// A deployment sets it on each server to its side's writer: the simulator's
// reader instances are their side's server reached at another address, so
// a session by a reader's address gets the writer's identifier too.
const InstanceIDFunction = "pg_catalog.aurora_db_instance_identifier"

// MaxReaders is the largest DeploymentConfig.Readers.
const MaxReaders = 8

// Replica is one row of aurora_replica_status(): one DB instance of a
// cluster.
type Replica struct {
	// ServerID is the DB instance identifier, the first label of its
	// instance endpoint ("orders-1", "orders-1-green-abc123").
	ServerID string
	// Writer marks the writer: its session_id is MASTER_SESSION_ID. A
	// reader's is an id of its own.
	Writer bool
}

// installTopology creates the control tables, aurora_replica_status(),
// with the columns the AWS wrappers and holdfast's failover monitor read
// (server_id, session_id, last_update_timestamp, replica_lag_in_msec, cpu)
// of the many the real function has, and aurora_db_instance_identifier()
// (NULL until an identifier is set, as no real server answers).
var installTopology = `
CREATE TABLE IF NOT EXISTS holdfast_fake.aurora_replica_status (
	ord        serial PRIMARY KEY,
	server_id  text,
	session_id text
);` + oneRowTable("holdfast_fake.aurora_instance", "server_id") + `CREATE OR REPLACE FUNCTION pg_catalog.aurora_db_instance_identifier()
RETURNS text LANGUAGE sql STABLE AS $fn$
	SELECT i.server_id FROM holdfast_fake.aurora_instance i
$fn$;
CREATE OR REPLACE FUNCTION pg_catalog.aurora_replica_status()
RETURNS TABLE (server_id text, session_id text, last_update_timestamp timestamptz, replica_lag_in_msec real, cpu real)
LANGUAGE sql STABLE AS $fn$
	SELECT r.server_id, r.session_id, now(),
		CASE WHEN r.session_id = 'MASTER_SESSION_ID' THEN NULL ELSE 0 END::real, 1.0::real
	FROM holdfast_fake.aurora_replica_status r ORDER BY r.ord
$fn$;
`

// SetTopology replaces the rows aurora_replica_status() returns, in one
// transaction. It needs the Aurora engine.
func (m *Metadata) SetTopology(ctx context.Context, replicas ...Replica) error {
	return m.exec(ctx, "set topology", func(tx pgx.Tx) error { return setTopology(ctx, tx, replicas) })
}

func setTopology(ctx context.Context, tx pgx.Tx, replicas []Replica) error {
	if _, err := tx.Exec(ctx, "DELETE FROM holdfast_fake.aurora_replica_status"); err != nil {
		return err
	}
	for i, r := range replicas {
		session := WriterSessionID
		if !r.Writer {
			session = fmt.Sprintf("5f0c0c1e-%04d-4000-8000-%012d", i, i)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO holdfast_fake.aurora_replica_status (server_id, session_id) VALUES ($1, $2)",
			r.ServerID, session); err != nil {
			return err
		}
	}
	return nil
}

// setSelf sets, in one transaction, the server's topology and its own
// identifier (that of the writer among replicas): a read of both sees the
// old pair or the new one.
func (m *Metadata) setSelf(ctx context.Context, replicas []Replica) error {
	id := ""
	for _, r := range replicas {
		if r.Writer {
			id = r.ServerID
			break
		}
	}
	return m.exec(ctx, "set topology", func(tx pgx.Tx) error {
		if err := setTopology(ctx, tx, replicas); err != nil {
			return err
		}
		return setInstanceID(ctx, tx, id)
	})
}

// Topology returns the rows aurora_replica_status() returns now.
func (m *Metadata) Topology(ctx context.Context) ([]Replica, error) {
	var out []Replica
	if err := m.exec(ctx, "read topology", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT coalesce(server_id, ''), coalesce(session_id, '') FROM holdfast_fake.aurora_replica_status ORDER BY ord")
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, session string
			if err := rows.Scan(&id, &session); err != nil {
				return err
			}
			out = append(out, Replica{ServerID: id, Writer: session == WriterSessionID})
		}
		return rows.Err()
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// SetInstanceID sets what aurora_db_instance_identifier() returns: the
// identifier of the DB instance this server is ("" for NULL). It needs the
// Aurora engine. [Env.NewDeployment] and [Deployment.Rename] set it on
// both servers, to the writer row's server_id of each side's topology.
func (m *Metadata) SetInstanceID(ctx context.Context, id string) error {
	return m.exec(ctx, "set instance id", func(tx pgx.Tx) error { return setInstanceID(ctx, tx, id) })
}

func setInstanceID(ctx context.Context, tx pgx.Tx, id string) error {
	var arg any
	if id != "" {
		arg = id
	}
	_, err := tx.Exec(ctx, "UPDATE holdfast_fake.aurora_instance SET server_id = $1", arg)
	return err
}

// InstanceID returns what aurora_db_instance_identifier() returns now (""
// for NULL).
func (m *Metadata) InstanceID(ctx context.Context) (string, error) {
	var id string
	if err := m.exec(ctx, "read instance id", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT coalesce(server_id, '') FROM holdfast_fake.aurora_instance").Scan(&id)
	}); err != nil {
		return "", err
	}
	return id, nil
}

// UninstallTopology drops aurora_replica_status() and
// aurora_db_instance_identifier() (the control tables stay), as on a server
// without them.
func (m *Metadata) UninstallTopology(ctx context.Context) error {
	return m.exec(ctx, "uninstall topology", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DROP FUNCTION IF EXISTS pg_catalog.aurora_replica_status();
			DROP FUNCTION IF EXISTS pg_catalog.aurora_db_instance_identifier()`)
		return err
	})
}

// ReaderAddr returns the address of reader instance i (1 to MaxReaders) of
// server s: s.Host with i added to its third byte (127.0.0.11 → 127.0.1.11
// for reader 1). Nothing listens there: [Env.Dial] connects it to s and
// reports the reader's address as the connection's remote address, so a
// reader is the same server (same data, writable) reached at an address of
// its own, which is what routing by address needs.
func (s *Server) ReaderAddr(i int) string {
	ip := net.ParseIP(s.Host).To4()
	if ip == nil || i < 1 || i > MaxReaders || int(ip[2])+i > 255 {
		return ""
	}
	return net.IPv4(ip[0], ip[1], ip[2]+byte(i), ip[3]).String()
}

// readerOf returns the server whose reader address addr ("ip:port") is.
func (e *Env) readerOf(addr string) *Server {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	for _, s := range []*Server{e.Blue, e.Green} {
		if p != strconv.Itoa(s.Port) || h == e.Blue.Host || h == e.Green.Host {
			continue
		}
		for i := 1; i <= MaxReaders; i++ {
			if s.ReaderAddr(i) == h {
				return s
			}
		}
	}
	return nil
}

// dialReader connects a reader address to its server, in either mode; ok
// is false for any other address.
func (e *Env) dialReader(ctx context.Context, network, addr string) (c net.Conn, ok bool, err error) {
	s := e.readerOf(addr)
	if s == nil {
		return nil, false, nil
	}
	var d net.Dialer
	c, err = d.DialContext(ctx, network, s.ListenAddr)
	if err != nil {
		return nil, true, err
	}
	h, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return &aliasConn{Conn: c, remote: &net.TCPAddr{IP: net.ParseIP(h), Port: port}}, true, nil
}

// withReaders adds the names of count reader instances to Aurora names:
// "orders-2", "orders-3", … with their green and old forms.
func (n Names) withReaders(count int) Names {
	if n.Cluster == "" || count <= 0 {
		return n
	}
	label, rest, _ := strings.Cut(n.Instance, ".")
	base := strings.TrimSuffix(label, "-1")
	greenLabel, greenRest, _ := strings.Cut(n.GreenInstance, ".")
	green := strings.TrimPrefix(greenLabel, label) // "-green-abc123"
	for i := 2; i <= count+1; i++ {
		id := base + "-" + strconv.Itoa(i)
		n.ReaderInstances = append(n.ReaderInstances, id+"."+rest)
		n.GreenReaderInstances = append(n.GreenReaderInstances, id+green+"."+greenRest)
		n.OldReaderInstances = append(n.OldReaderInstances, id+"-old1."+rest)
	}
	return n
}

// serverID returns the first label of an instance endpoint.
func serverID(host string) string {
	id, _, _ := strings.Cut(host, ".")
	return id
}
