package alloydbtest_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"google.golang.org/api/googleapi"

	"github.com/holdfast-db/holdfast/fakes"
	fake "github.com/holdfast-db/holdfast/fakes/alloydbtest"
)

// chainTypes lists the types of err's chain, outermost first.
func chainTypes(err error) []string {
	var types []string
	for err != nil {
		types = append(types, fmt.Sprintf("%T", err))
		err = errors.Unwrap(err)
	}
	return types
}

// Each step fails a scripted dial with the chain of types the real
// connector returns for the same failure against the fake.
func TestStepsMatchTheRealConnector(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		step   fakes.Step
		iam    bool
		inject func(s *fake.Server)
	}{
		{fake.TokenFetch503(), false, func(s *fake.Server) { s.Fail(fake.APIToken, 503, -1) }},
		{fake.LoginTokenFetch(503), true, func(s *fake.Server) { s.Fail(fake.LoginToken, 503, -1) }},
		{fake.Forbidden(), false, func(s *fake.Server) { s.Fail(fake.ConnectionInfo, 403, -1) }},
		{fake.AdminAPI(404), false, func(s *fake.Server) { s.Fail(fake.ConnectionInfo, 404, -1) }},
		{fake.MetadataExchange(""), false, func(s *fake.Server) { s.Primary().RejectMetadataExchange(-1, "") }},
	} {
		t.Run(tc.step.String(), func(t *testing.T) {
			t.Parallel()
			s := newFake(t, fake.Config{Backend: "127.0.0.1:1"})
			d := newDialer(t, s, tc.iam)
			tc.inject(s)
			_, real := d.Dial(ctxFor(t, 30*time.Second), s.URI())
			_, scripted := fakes.NewConnector("127.0.0.1:1", tc.step).Dial(context.Background(), "tcp", "")
			if got, want := chainTypes(scripted), chainTypes(real); !reflect.DeepEqual(got, want) {
				t.Errorf("scripted chain %v\nreal chain     %v", got, want)
			}
		})
	}
}

// In a PasswordSource, a step fails with the token source's or the API
// client's own error.
func TestStepsInAPasswordSource(t *testing.T) {
	t.Parallel()
	src := fakes.NewPasswordSource("pw", fake.TokenFetch503(), fake.Forbidden(), fake.MetadataExchange("no"))
	_, err := src.Password(context.Background(), "")
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Response.StatusCode != 503 || !ae.Temporary() {
		t.Errorf("token step: %v", err)
	}
	_, err = src.Password(context.Background(), "")
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != 403 {
		t.Errorf("forbidden step: %v", err)
	}
	if _, err = src.Password(context.Background(), ""); err == nil || err.Error() != "no" {
		t.Errorf("exchange step: %v", err)
	}
	if got := fmt.Sprint(fake.AdminAPI(503).Times(2), " ", fake.LoginTokenFetch(401)); got != "alloydbtest.AdminAPI(503).Times(2) alloydbtest.LoginTokenFetch(401)" {
		t.Errorf("String = %q", got)
	}
}
