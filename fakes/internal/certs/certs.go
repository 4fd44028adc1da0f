// Package certs is the throwaway certificate authority of the fakes that
// serve TLS (fakes/bluegreentest, fakes/failovertest, fakes/outagetest,
// and the Google Cloud fakes fakes/cloudsqltest and fakes/alloydbtest):
// a CA made at start, valid for a day, that signs server certificates for
// the names a test's clients verify, and client certificates for the keys
// a connector sends. Nothing of it is secret or kept.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Authority is a throwaway CA (ECDSA P-256): it signs the servers'
// certificates. It is safe for concurrent use.
type Authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	serial  atomic.Int64
}

// New makes a CA, "holdfast fake RDS CA", valid from an hour ago for a day.
func New() (*Authority, error) { return NewNamed("holdfast fake RDS CA") }

// NewNamed makes a CA whose common name is cn, valid from an hour ago for
// a day.
func NewNamed(cn string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	a := &Authority{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	a.serial.Store(1)
	return a, nil
}

// CertPEM returns the CA's certificate, PEM: what clients trust
// (sslrootcert).
func (a *Authority) CertPEM() []byte { return a.certPEM }

// WriteTemp writes the CA's certificate (PEM) to ca.pem in a new
// temporary directory, named after pattern as os.MkdirTemp names it: the
// file clients trust (sslrootcert). The caller removes dir.
func (a *Authority) WriteTemp(pattern string) (dir, file string, err error) {
	if dir, err = os.MkdirTemp("", pattern); err != nil {
		return "", "", err
	}
	file = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, a.certPEM, 0o644); err != nil {
		return "", "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, file, nil
}

// Cert returns the CA's certificate.
func (a *Authority) Cert() *x509.Certificate { return a.cert }

// Issue returns a server certificate for names (its DNS names, none of
// them when names is empty) and its key, PEM, signed by a; cn is its
// common name.
func (a *Authority) Issue(cn string, names []string) (certPEM, keyPEM []byte, err error) {
	return a.IssueIP(cn, names, nil)
}

// IssueIP is Issue with IP addresses among the certificate's names too.
func (a *Authority) IssueIP(cn string, names []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(a.serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// KeyPair is Issue as a tls.Certificate.
func (a *Authority) KeyPair(cn string, names []string) (*tls.Certificate, error) {
	return a.KeyPairIP(cn, names, nil)
}

// KeyPairIP is IssueIP as a tls.Certificate.
func (a *Authority) KeyPairIP(cn string, names []string, ips []net.IP) (*tls.Certificate, error) {
	certPEM, keyPEM, err := a.IssueIP(cn, names, ips)
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// SignClient returns a client certificate (for client authentication) for
// the public key pub, PEM, signed by a, with common name cn, valid from
// five minutes ago for lifetime: what a managed database's API issues to
// its connector for the key the connector sent.
func (a *Authority) SignClient(pub any, cn string, lifetime time.Duration) ([]byte, error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(a.serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, pub, a.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
