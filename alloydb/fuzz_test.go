package alloydb_test

import (
	"errors"
	"syscall"
	"testing"

	"cloud.google.com/go/alloydbconn"
	"cloud.google.com/go/alloydbconn/errtype"
	"cloud.google.com/go/auth"

	"github.com/holdfast-db/holdfast/alloydb"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/gcpconn/gcptest"
)

const instance = "p.r.c.i" // as the connector writes an instance in its errors

// alloyTree returns the builder of error trees of Google's, the AlloyDB
// connector's, this package's and a few core leaves (see gcptest.Tree for
// the opcodes).
func alloyTree() *gcptest.Tree {
	return &gcptest.Tree{
		Leaves: []func(*gcptest.Tree) error{
			gcptest.Message, gcptest.PgError, gcptest.Errno, gcptest.Canceled, gcptest.DeadlineExceeded,
			gcptest.Google, gcptest.Retrieve, gcptest.RetrieveNoResponse, gcptest.InvalidGrant,
			gcptest.AuthNoResponse, gcptest.Auth, gcptest.Metadata,
			func(*gcptest.Tree) error { return errtype.NewConfigError(gcptest.Secret, instance) }, // 12
			gcptest.TLSVerification,
			func(*gcptest.Tree) error { var re *errtype.RefreshError; return re }, // 14: typed nil; its Unwrap would panic
			func(*gcptest.Tree) error { return alloydbconn.ErrDialerClosed },      // 15
			gcptest.EOF,
			func(*gcptest.Tree) error { var me *alloydb.MetadataExchangeError; return me }, // 17: typed nil
		},
		Wraps: []func(*gcptest.Tree, error) error{
			gcptest.Lazy,
			func(_ *gcptest.Tree, e error) error { return errtype.NewRefreshError(gcptest.Secret, instance, e) },
			func(_ *gcptest.Tree, e error) error { return errtype.NewDialError(gcptest.Secret, instance, e) },
			func(_ *gcptest.Tree, e error) error {
				return &alloydb.MetadataExchangeError{Instance: instance, Err: e}
			},
			gcptest.URL, gcptest.DialOp, gcptest.AuthWrap, gcptest.AuthStatus, gcptest.GoogleWrap, gcptest.ReadOp,
			gcptest.JoinNil,
		},
	}
}

// FuzzTypeRules classifies trees of Google's and the AlloyDB connector's
// error types (and this package's MetadataExchangeError) with TypeRules,
// and with Rules too as With makes a factory do: no panic (several of
// these types panic in Error or, as nil pointers, in Unwrap), short
// machine-readable reasons, deterministic verdicts, and the "anywhere"
// rules hold.
func FuzzTypeRules(f *testing.F) {
	// Opcodes: 0x00-0x7F leaf (op%18), 0x80-0xBF wrapper ((op&0x3F)%11),
	// 0xC0-0xFF join (even: errors.Join(top, top); odd: join the top two).
	f.Add([]byte{})
	f.Add([]byte{6, 8, 0x87, 8, 0x83})                // MetadataExchangeError(auth.Error{503}(RetrieveError{503}))
	f.Add([]byte{0, 0x83})                            // MetadataExchangeError(a message): the instance refused
	f.Add([]byte{2, 0, 0x89, 0x83})                   // MetadataExchangeError(read OpError(refused))
	f.Add([]byte{5, 2, 0x81, 0x80})                   // lazy(RefreshError(googleapi.Error{403}))
	f.Add([]byte{6, 8, 0x87, 8, 0x84, 0x81})          // RefreshError(url(auth.Error{503}(RetrieveError{503})))
	f.Add([]byte{3, 12, 0xC1, 0x83})                  // MetadataExchangeError(join(canceled, ConfigError))
	f.Add([]byte{2, 0, 0x82, 15, 0xC1})               // join(DialError(refused), ErrDialerClosed)
	f.Add([]byte{17, 0x83})                           // MetadataExchangeError(typed nil MetadataExchangeError)
	f.Add([]byte{13, 0x82})                           // DialError(TLS verification)
	f.Add([]byte{5, 8, 0xC0, 0xC0, 0xC0, 0xC0, 0x83}) // shared joins

	checks := gcptest.Checks{
		Types:    classify.New().WithTypes(alloydb.TypeRules()...),
		Full:     classify.New(alloydb.Rules()...).WithTypes(alloydb.TypeRules()...),
		Closed:   alloydbconn.ErrDialerClosed,
		IsConfig: func(err error) bool { var ce *errtype.ConfigError; return errors.As(err, &ce) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := alloyTree()
		checks.Check(t, b, b.Build(data))
	})
}

// The metadata exchange's wrapper: its cause decides when one is
// recognised, else it is Fatal with its own reason.
func TestMetadataExchangeError(t *testing.T) {
	t.Parallel()
	c := classify.New(alloydb.Rules()...).WithTypes(alloydb.TypeRules()...)
	wrap := func(err error) error { return &alloydb.MetadataExchangeError{Instance: instance, Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want classify.Verdict
	}{
		{"the instance's refusal", wrap(errors.New(gcptest.Secret)), gcptest.Fatal(classify.ReasonAlloyDBMetadataExchange)},
		{"login token 503", wrap(&auth.Error{Response: gcptest.Resp(503), Err: gcptest.RetrieveErr(503)}), gcptest.Transient("token-fetch-503")},
		{"reset", wrap(gcptest.SyscallErr("read", syscall.ECONNRESET)), gcptest.Transient(classify.ReasonConnReset)},
		{"a TLS alert", wrap(errors.New("remote error: tls: bad certificate")), gcptest.Fatal(classify.ReasonAlloyDBMetadataExchange)},
		{"without the wrapper", errors.New(gcptest.Secret), gcptest.Fatal(classify.ReasonUnknown)},
	} {
		if got := c.Classify(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	me := wrap(errors.New("denied")).(*alloydb.MetadataExchangeError)
	if me.Error() != "alloydb: the metadata exchange with p.r.c.i failed: denied" || !errors.Is(me, me.Err) {
		t.Errorf("Error() = %q", me.Error())
	}
}
