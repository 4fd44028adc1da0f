// Package secretsmanagertest is a fake AWS Secrets Manager for tests: an
// HTTP server speaking the service's wire protocol (AWS JSON 1.1: POST /
// with X-Amz-Target "secretsmanager.GetSecretValue" and a JSON body), so
// that the real aws-sdk-go-v2 client talks to it through its endpoint
// option, with static credentials and no network:
//
//	sm := secretsmanagertest.New()
//	defer sm.Close()
//	client := secretsmanager.New(secretsmanager.Options{
//		Region:       "us-east-1",
//		BaseEndpoint: aws.String(sm.URL),
//		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
//	})
//
// It implements GetSecretValue (by VersionStage or VersionId),
// DescribeSecret, PutSecretValue and UpdateSecretVersionStage, with the
// version stages AWSCURRENT, AWSPENDING and AWSPREVIOUS, and answers
// errors as the service does: HTTP 4xx/5xx with X-Amzn-ErrorType and a
// body {"__type": code, "message": ...}.
//
// A rotation can be stepped through ([Server.Rotate]): CreateSecret stores
// the new credentials as AWSPENDING, SetSecret calls a callback that
// changes the password on the real database (Rotator.SetSecret),
// TestSecret calls another that logs in with them, FinishSecret moves
// AWSCURRENT to the new version. [SingleUser] changes the user's password
// in place; [AlternatingUsers] changes the other of two users (user and
// user_clone). Faults: [Server.Throttle] (400 ThrottlingException),
// [Server.Fail] (any code and status), [Server.DeleteSecret] (400
// ResourceNotFoundException afterwards), [Server.SetLatency].
//
// The package imports no AWS module; its tests use the SDK client.
package secretsmanagertest
