package cloudsql_test

import (
	"errors"
	"testing"

	"cloud.google.com/go/cloudsqlconn"
	"cloud.google.com/go/cloudsqlconn/errtype"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/cloudsql"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

// googleTree returns the builder of error trees of Google's, the Cloud SQL
// connector's and a few core leaves (see gcptest.Tree for the opcodes).
func googleTree() *gcptest.Tree {
	return &gcptest.Tree{
		Leaves: []func(*gcptest.Tree) error{
			gcptest.Message, gcptest.PgError, gcptest.Errno, gcptest.Canceled, gcptest.DeadlineExceeded,
			gcptest.Google, gcptest.Retrieve, gcptest.RetrieveNoResponse, gcptest.InvalidGrant,
			gcptest.AuthNoResponse, gcptest.Auth, gcptest.Metadata,
			func(*gcptest.Tree) error { return errtype.NewConfigError(secret, connName) }, // 12
			gcptest.TLSVerification,
			func(*gcptest.Tree) error { var re *errtype.RefreshError; return re }, // 14: typed nil; its Unwrap would panic
			func(*gcptest.Tree) error { return cloudsqlconn.ErrDialerClosed },     // 15
			gcptest.EOF,
			func(*gcptest.Tree) error { // 17: a server identity failure
				return errtype.NewDialError(`certificate had CN "x", expected "p:i"`, connName, nil)
			},
		},
		Wraps: []func(*gcptest.Tree, error) error{
			gcptest.Lazy,
			func(_ *gcptest.Tree, e error) error { return errtype.NewRefreshError(secret, connName, e) },
			func(_ *gcptest.Tree, e error) error { return errtype.NewDialError(secret, connName, e) },
			func(_ *gcptest.Tree, e error) error { return errtype.NewResourceExhaustedError(secret, connName, e) },
			gcptest.URL, gcptest.DialOp, gcptest.AuthWrap, gcptest.AuthStatus, gcptest.GoogleWrap, gcptest.ReadOp,
			gcptest.JoinNil,
		},
	}
}

// FuzzTypeRules classifies trees of Google's error types with TypeRules,
// and with Rules too as With makes a factory do: no panic (several of these
// types panic in Error or, as nil pointers, in Unwrap), short
// machine-readable reasons, deterministic verdicts, and the "anywhere"
// rules hold.
func FuzzTypeRules(f *testing.F) {
	// Opcodes: 0x00-0x7F leaf (op%18), 0x80-0xBF wrapper ((op&0x3F)%11),
	// 0xC0-0xFF join (even: errors.Join(top, top); odd: join the top two).
	f.Add([]byte{})
	f.Add([]byte{9, 0x81, 0x80})                // lazy(RefreshError(auth.Error without Response))
	f.Add([]byte{6, 8, 0x87, 8, 0x84})          // url(auth.Error{503}(RetrieveError{503}))
	f.Add([]byte{11, 8, 0x89, 0x84, 0x81})      // RefreshError(url(fmt(metadata.Error{503})))
	f.Add([]byte{5, 2, 0x81, 0x80})             // lazy(RefreshError(googleapi.Error{403}))
	f.Add([]byte{8, 0x87, 8})                   // auth.Error{503}(invalid_grant)
	f.Add([]byte{2, 0, 12, 0xC1})               // join(refused, ConfigError)
	f.Add([]byte{3, 12, 0xC1, 0x82})            // DialError(join(canceled, ConfigError))
	f.Add([]byte{2, 0, 0x82, 15, 0xC1})         // join(DialError(refused), ErrDialerClosed)
	f.Add([]byte{17, 0x82})                     // DialError(server identity)
	f.Add([]byte{14, 7, 0xC1, 0x85})            // OpError(join(typed nil, RetrieveError{}))
	f.Add([]byte{5, 8, 0xC0, 0xC0, 0xC0, 0xC0}) // shared joins

	// As With installs them: Rules (which decide before the walk), then
	// TypeRules in the walk; and TypeRules alone.
	checks := gcptest.Checks{
		Types:    withGoogle,
		Full:     classify.New(cloudsql.Rules()...).WithTypes(cloudsql.TypeRules()...),
		Closed:   cloudsqlconn.ErrDialerClosed,
		IsConfig: func(err error) bool { var ce *errtype.ConfigError; return errors.As(err, &ce) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := googleTree()
		checks.Check(t, b, b.Build(data))
	})
}
