package certs

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// An issued certificate verifies for its names against the CA, and for no
// other name.
func TestIssue(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(a.CertPEM()) {
		t.Fatal("CertPEM: no certificate")
	}
	names := []string{"db.example.com", "db-ro.example.com"}
	certPEM, _, err := a.Issue("db-1.example.com", names)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("Issue: no PEM block")
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: roots}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: roots}); err == nil {
		t.Error("verified for a name it does not carry")
	}
	kp, err := a.KeyPair("db-1.example.com", names)
	if err != nil || len(kp.Certificate) == 0 {
		t.Fatalf("KeyPair: %v", err)
	}
	if certPEM2, _, _ := a.Issue("x", nil); string(certPEM2) == string(certPEM) {
		t.Error("two certificates alike")
	}
}

// WriteTemp writes the CA's certificate in a directory of its own.
func TestWriteTemp(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	dir, file, err := a.WriteTemp("holdfast-certs-test-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if b, err := os.ReadFile(file); err != nil || string(b) != string(a.CertPEM()) || filepath.Dir(file) != dir {
		t.Fatalf("WriteTemp: %s in %s: %q, %v", file, dir, b, err)
	}
}
