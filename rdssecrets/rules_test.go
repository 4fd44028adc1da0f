package rdssecrets_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/secretsmanagertest"
	"github.com/holdfast-db/holdfast/rdssecrets"
)

// TestRules classifies the SDK's real errors, as the fake answers them.
func TestRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sm := secretsmanagertest.New()
	defer sm.Close()
	sm.CreateSecret(secretName, secretsmanagertest.RDSSecret{Username: "u", Password: "secret-pw-1"}.JSON())
	client := smClient(sm)
	f, err := holdfast.New(holdfast.WithClassifier(rdssecrets.Rules()...))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		code   string
		status int
		class  classify.Class
		reason string
	}{
		{"ThrottlingException", 400, classify.Transient, rdssecrets.ReasonThrottled},
		{"TooManyRequests", 429, classify.Transient, rdssecrets.ReasonThrottled},
		{"InternalServiceError", 500, classify.Transient, "secretsmanager-500"},
		{"ServiceUnavailable", 503, classify.Transient, "secretsmanager-503"},
		{"AccessDeniedException", 400, classify.Fatal, rdssecrets.ReasonDenied},
		{"ResourceNotFoundException", 400, classify.Fatal, rdssecrets.ReasonNotFound},
		{"DecryptionFailure", 400, classify.Fatal, rdssecrets.ReasonDecryption},
		{"InvalidRequestException", 400, classify.Fatal, rdssecrets.ReasonInvalid},
		{"SomethingElse", 403, classify.Fatal, "secretsmanager-403"},
	} {
		sm.Fail("", tc.code, tc.status, 1)
		_, err := rdssecrets.Get(ctx, client, secretName, "")
		if v := f.Classify(err); v.Class != tc.class || v.Reason != tc.reason {
			t.Errorf("%s %d: %v → %v, want %v %s", tc.code, tc.status, err, v, tc.class, tc.reason)
		}
		if !errors.Is(err, rdssecrets.ErrSecret) {
			t.Errorf("%s: not ErrSecret: %v", tc.code, err)
		}
	}

	// Not RDS JSON.
	sm.CreateSecret("bad", `{"user":"u"}`)
	_, err = rdssecrets.Get(ctx, client, "bad", "")
	if v := f.Classify(err); !errors.Is(err, rdssecrets.ErrFormat) || v.Class != classify.Fatal || v.Reason != rdssecrets.ReasonFormat {
		t.Errorf("no username: %v → %v", err, v)
	}
	sm.CreateSecret("plain", `not json at all secret-pw-2`)
	if _, err = rdssecrets.Get(ctx, client, "plain", ""); err == nil || strings.Contains(err.Error(), "secret-pw-2") {
		t.Errorf("a secret string that is not JSON: %v", err)
	}

	// The endpoint refuses connections: a network error, left to the
	// built-in rules (Transient).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	dead := secretsmanager.New(secretsmanager.Options{
		Region: secretsmanagertest.Region, BaseEndpoint: aws.String("http://" + addr),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""), Retryer: aws.NopRetryer{},
	})
	_, err = rdssecrets.Get(ctx, dead, secretName, "")
	if v := f.Classify(err); v.Class != classify.Transient {
		t.Errorf("a refused endpoint: %v → %v, want Transient", err, v)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []rdssecrets.Config{{}, {Client: &secretsmanager.Client{}}} {
		if _, err := holdfast.New(rdssecrets.With(c)); !errors.Is(err, rdssecrets.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want a ConfigError", c, err)
		}
	}
	s := rdssecrets.Secret{Username: "u", Password: "secret-pw-3"}
	if strings.Contains(s.String(), "secret-pw-3") {
		t.Errorf("Secret.String shows the password: %s", s)
	}
}
