package gcpfake

import (
	"crypto/rand"
	"crypto/rsa"
	"sync"
)

var (
	rsaKeyOnce sync.Once
	rsaKey     *rsa.PrivateKey
	rsaKeyErr  error
)

// RSAKey returns the 2048-bit RSA key that every fake's dialer options
// share (the connectors' WithRSAKey), so that each new dialer does not
// spend time generating one. It is generated on first use and is safe for
// concurrent use.
func RSAKey() (*rsa.PrivateKey, error) {
	rsaKeyOnce.Do(func() {
		rsaKey, rsaKeyErr = rsa.GenerateKey(rand.Reader, 2048)
	})
	return rsaKey, rsaKeyErr
}
