package failovertest

import (
	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
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
		names = append(names, c.InstanceEndpoint(n.ID))
	}
	certPEM, keyPEM, err := ca.Issue(c.InstanceEndpoint(c.nodes[0].ID), names)
	if err != nil {
		return err
	}
	if c.caDir, c.CAFile, err = ca.WriteTemp("holdfast-failover-ca-*"); err != nil {
		return err
	}
	c.ca = ca
	sc := &pgnode.Cert{CertPEM: certPEM, KeyPEM: keyPEM}
	for _, n := range c.nodes {
		n.Cert = sc
	}
	return nil
}
