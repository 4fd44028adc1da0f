package secretsmanagertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/holdfast-db/holdfast/fakes/secretsmanagertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, sm *secretsmanagertest.Server) *secretsmanager.Client {
	t.Helper()
	return secretsmanager.New(secretsmanager.Options{
		Region:       secretsmanagertest.Region,
		BaseEndpoint: aws.String(sm.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
		Retryer:      aws.NopRetryer{},
	})
}

func get(ctx context.Context, c *secretsmanager.Client, stage string) (secretsmanagertest.RDSSecret, *secretsmanager.GetSecretValueOutput, error) {
	in := &secretsmanager.GetSecretValueInput{SecretId: aws.String("app/db")}
	if stage != "" {
		in.VersionStage = aws.String(stage)
	}
	out, err := c.GetSecretValue(ctx, in)
	if err != nil {
		return secretsmanagertest.RDSSecret{}, nil, err
	}
	r, err := secretsmanagertest.ParseRDSSecret(aws.ToString(out.SecretString))
	return r, out, err
}

func TestGetSecretValueAndRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sm := secretsmanagertest.New()
	defer sm.Close()
	c := client(t, sm)
	first := sm.CreateSecret("app/db", secretsmanagertest.RDSSecret{Engine: "postgres", Host: "db.example", Port: 5432, Username: "app", Password: "pw-0", DBName: "app"}.JSON())

	s, out, err := get(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Username != "app" || s.Password != "pw-0" || s.Port != 5432 || aws.ToString(out.VersionId) != first {
		t.Fatalf("GetSecretValue = %+v, version %s", s, aws.ToString(out.VersionId))
	}
	if out.CreatedDate == nil || time.Since(*out.CreatedDate) > time.Minute {
		t.Fatalf("CreatedDate = %v", out.CreatedDate)
	}
	if _, _, err := get(ctx, c, secretsmanagertest.StagePending); !isCode(err, "ResourceNotFoundException") {
		t.Fatalf("AWSPENDING before a rotation: %v, want ResourceNotFoundException", err)
	}

	var set []string
	ro := sm.Rotate("app/db", secretsmanagertest.Rotator{
		Strategy: secretsmanagertest.AlternatingUsers,
		SetSecret: func(_ context.Context, pending, current secretsmanagertest.RDSSecret) error {
			set = append(set, pending.Username+"/"+current.Username)
			return nil
		},
	})
	for _, step := range []func(context.Context) error{ro.CreateSecret, ro.SetSecret, ro.TestSecret} {
		if err := step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	p, pout, err := get(ctx, c, secretsmanagertest.StagePending)
	if err != nil {
		t.Fatal(err)
	}
	if p.Username != "app_clone" || p.Password == "pw-0" || aws.ToString(pout.VersionId) != ro.VersionID() {
		t.Fatalf("AWSPENDING = %+v", p)
	}
	if s, _, _ := get(ctx, c, ""); s.Password != "pw-0" {
		t.Fatalf("AWSCURRENT moved before finishSecret: %+v", s)
	}
	if len(set) != 1 || set[0] != "app_clone/app" {
		t.Fatalf("setSecret hook calls %v", set)
	}
	if err := ro.FinishSecret(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := get(ctx, c, ""); s.Username != "app_clone" {
		t.Fatalf("AWSCURRENT after finishSecret: %+v", s)
	}
	if s, _, _ := get(ctx, c, secretsmanagertest.StagePrevious); s.Password != "pw-0" {
		t.Fatalf("AWSPREVIOUS after finishSecret: %+v", s)
	}
	d, err := c.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String("app/db")})
	if err != nil {
		t.Fatal(err)
	}
	if st := d.VersionIdsToStages[ro.VersionID()]; len(st) != 1 || st[0] != "AWSCURRENT" {
		t.Fatalf("VersionIdsToStages = %v", d.VersionIdsToStages)
	}

	// The same steps over the wire, as a rotation Lambda makes them.
	put, err := c.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: aws.String("app/db"), ClientRequestToken: aws.String("11111111-2222-3333-4444-555555555555"),
		SecretString: aws.String(secretsmanagertest.RDSSecret{Username: "app", Password: "pw-2"}.JSON()), VersionStages: []string{"AWSPENDING"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{
		SecretId: aws.String("app/db"), VersionStage: aws.String("AWSCURRENT"),
		MoveToVersionId: put.VersionId, RemoveFromVersionId: aws.String(ro.VersionID()),
	}); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := get(ctx, c, ""); s.Password != "pw-2" {
		t.Fatalf("AWSCURRENT after UpdateSecretVersionStage: %+v", s)
	}
	if s, _, _ := get(ctx, c, secretsmanagertest.StagePrevious); s.Username != "app_clone" {
		t.Fatalf("AWSPREVIOUS after UpdateSecretVersionStage: %+v", s)
	}
}

func isCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

func TestFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sm := secretsmanagertest.New()
	defer sm.Close()
	c := client(t, sm)
	sm.CreateSecret("app/db", secretsmanagertest.RDSSecret{Username: "app", Password: "pw-0"}.JSON())

	sm.Throttle("GetSecretValue", 1)
	_, _, err := get(ctx, c, "")
	if !isCode(err, "ThrottlingException") {
		t.Fatalf("throttled: %v", err)
	}
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 400 {
		t.Fatalf("throttled: no HTTP 400 in %v", err)
	}
	if _, _, err := get(ctx, c, ""); err != nil {
		t.Fatalf("after the one throttle: %v", err)
	}
	sm.Fail("", "InternalServiceError", 500, 1)
	var ise *types.InternalServiceError
	if _, _, err := get(ctx, c, ""); !errors.As(err, &ise) {
		t.Fatalf("500: %v, want *types.InternalServiceError", err)
	}
	sm.DeleteSecret("app/db")
	var rnf *types.ResourceNotFoundException
	if _, _, err := get(ctx, c, ""); !errors.As(err, &rnf) {
		t.Fatalf("deleted: %v, want *types.ResourceNotFoundException", err)
	}
	if n := sm.Calls("GetSecretValue"); n != 4 {
		t.Fatalf("Calls = %d, want 4", n)
	}
}
