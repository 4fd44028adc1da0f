package cloudsqltest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// ca is a certificate authority of the fake: a self-signed root.
type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newCA(cn string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"holdfast fake Cloud SQL"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key}, nil
}

// pem returns the CA certificate as a PEM block.
func (c *ca) pem() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw}))
}

// serverCert issues the instance's TLS certificate: Subject CN cn, no DNS
// names, valid for server authentication.
func (c *ca) serverCert(cn string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// ephemeralCert signs a client certificate for the public key in pubPEM, as
// generateEphemeralCert does: the connector sends a PEM block of type
// "RSA PUBLIC KEY" that holds a PKIX-encoded key. The certificate is valid
// for one hour.
func (c *ca) ephemeralCert(pubPEM string) (string, error) {
	b, _ := pem.Decode([]byte(pubPEM))
	if b == nil {
		return "", errors.New("public_key is not PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return "", fmt.Errorf("public_key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "holdfast-fake-ephemeral"},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, pub, c.key)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
}

var serialLimit = new(big.Int).Lsh(big.NewInt(1), 62)

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, serialLimit)
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

var (
	rsaKeyOnce sync.Once
	rsaKey     *rsa.PrivateKey
	rsaKeyErr  error
)

// RSAKey returns the 2048-bit RSA key that the dialer options of every
// Server in the process share (cloudsqlconn.WithRSAKey), so that each new
// dialer does not spend time generating one. It is generated on first use
// and is safe for concurrent use.
func RSAKey() (*rsa.PrivateKey, error) {
	rsaKeyOnce.Do(func() {
		rsaKey, rsaKeyErr = rsa.GenerateKey(rand.Reader, 2048)
	})
	return rsaKey, rsaKeyErr
}
