package cloudsqltest

import (
	"crypto/rsa"

	"github.com/holdfast-db/holdfast/fakes/internal/gcpfake"
)

// RSAKey returns the 2048-bit RSA key that the dialer options of every
// Server in the process share (cloudsqlconn.WithRSAKey), so that each new
// dialer does not spend time generating one. It is generated on first use
// and is safe for concurrent use.
func RSAKey() (*rsa.PrivateKey, error) { return gcpfake.RSAKey() }
