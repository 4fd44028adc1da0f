package failovertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/jackc/pgx/v5"
)

// serverCert is the certificate every server presents with Config.TLS,
// and its key, PEM.
type serverCert struct {
	certPEM, keyPEM []byte
}

// The files of the certificate and its key in a server's data directory,
// where ssl_cert_file and ssl_key_file find them (relative paths are read
// from the data directory).
const (
	certFile = "server.crt"
	keyFile  = "server.key"
)

// makeCert makes the CA, writes it to CAFile and issues the servers'
// certificate: one for all of them, as one name can lead to any of them.
// Its DNS names are the cluster endpoint, the reader endpoint and every
// instance endpoint, as an Aurora instance's certificate names the
// cluster's endpoints and its own; its common name is the first writer's
// instance endpoint.
func (c *Cluster) makeCert() error {
	ca, err := certs.New()
	if err != nil {
		return err
	}
	names := []string{c.ClusterEndpoint, c.ReaderEndpoint}
	for _, n := range c.nodes {
		names = append(names, c.InstanceEndpoint(n.id))
	}
	certPEM, keyPEM, err := ca.Issue(c.InstanceEndpoint(c.nodes[0].id), names)
	if err != nil {
		return err
	}
	if c.caDir, err = os.MkdirTemp("", "holdfast-failover-ca-*"); err != nil {
		return err
	}
	c.CAFile = filepath.Join(c.caDir, "ca.pem")
	if err := os.WriteFile(c.CAFile, ca.CertPEM(), 0o644); err != nil {
		return err
	}
	c.ca = ca
	sc := &serverCert{certPEM: certPEM, keyPEM: keyPEM}
	for _, n := range c.nodes {
		n.cert = sc
	}
	return nil
}

// installCert writes the certificate and its key into the node's data
// directory (nothing without TLS). The server runs as the owner of the
// files it reads and refuses a key file that others can read: both are
// given to the server's OS user, the key with mode 0600. pg_basebackup
// copies the two files to a standby with the rest of the data directory;
// they are written again all the same, so that a standby does not depend
// on it.
func (n *node) installCert() error {
	if n.cert == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{certFile, n.cert.certPEM, 0o644}, {keyFile, n.cert.keyPEM, 0o600}} {
		name := filepath.Join(n.data(), f.name)
		if err := os.WriteFile(name, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(name, f.mode); err != nil { // an existing file keeps its mode through WriteFile
			return err
		}
		if err := n.chown(name); err != nil {
			return err
		}
	}
	return nil
}

// waitTLS waits until a new connection to n gets TLS (pg_stat_ssl): a
// configuration reload is asynchronous.
func waitTLS(ctx context.Context, n *node) error {
	dsn := pgurl.Superuser(n.addr(), "postgres", "sslmode=require&connect_timeout=5")
	var last error
	err := poll(ctx, func() (bool, error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			last = err
			return false, nil
		}
		defer conn.Close(context.Background())
		var on bool
		if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&on); err != nil {
			last = err
			return false, nil
		}
		return on, nil
	})
	if err != nil {
		return fmt.Errorf("%s: TLS not on: %w", n.id, errors.Join(err, last))
	}
	return nil
}
