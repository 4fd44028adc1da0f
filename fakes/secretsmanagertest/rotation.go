package secretsmanagertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// RDSSecret is the JSON shape of an RDS database secret, as Secrets
// Manager's rotation templates expect it.
type RDSSecret struct {
	Engine    string `json:"engine,omitempty"`
	Host      string `json:"host,omitempty"`
	Port      int    `json:"port,omitempty"`
	Username  string `json:"username"`
	Password  string `json:"password"`
	DBName    string `json:"dbname,omitempty"`
	MasterARN string `json:"masterarn,omitempty"`
}

// JSON returns the secret string.
func (r RDSSecret) JSON() string {
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return string(b)
}

// ParseRDSSecret parses a secret string of the RDS shape.
func ParseRDSSecret(s string) (RDSSecret, error) {
	var r RDSSecret
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return RDSSecret{}, fmt.Errorf("secretsmanagertest: not an RDS secret: %w", err)
	}
	return r, nil
}

// Strategy is a rotation strategy of Secrets Manager.
type Strategy int

const (
	// SingleUser changes the password of the secret's user in place.
	SingleUser Strategy = iota
	// AlternatingUsers changes the password of the other of two users
	// (user and user_clone) and then makes it current.
	AlternatingUsers
)

func (s Strategy) String() string {
	if s == AlternatingUsers {
		return "alternating-users"
	}
	return "single-user"
}

// Rotator says how a rotation runs: the Lambda function's steps that
// touch the database are the callbacks.
type Rotator struct {
	Strategy Strategy
	// CloneSuffix names the second user of AlternatingUsers (user +
	// suffix). Default "_clone", as the AWS rotation templates.
	CloneSuffix string
	// SetSecret is the database side of setSecret: make pending's user log
	// in with pending's password (ALTER ROLE ... PASSWORD) on the real
	// database. current is the AWSCURRENT secret. Required.
	SetSecret func(ctx context.Context, pending, current RDSSecret) error
	// TestSecret is testSecret: log in with pending. Optional.
	TestSecret func(ctx context.Context, pending RDSSecret) error
	// NewPassword returns a new password. Default: 32 random hex digits.
	NewPassword func() string
}

// Rotation is one rotation of a secret, run step by step (each step is
// what the rotation Lambda does when Secrets Manager invokes it with that
// step): CreateSecret, SetSecret, TestSecret, FinishSecret.
type Rotation struct {
	s     *Server
	name  string
	r     Rotator
	token string // the ClientRequestToken: the new version's id
}

// Rotate begins a rotation of the secret name (no step is run yet).
func (s *Server) Rotate(name string, r Rotator) *Rotation {
	if r.CloneSuffix == "" {
		r.CloneSuffix = "_clone"
	}
	if r.NewPassword == nil {
		r.NewPassword = func() string {
			var b [16]byte
			_, _ = rand.Read(b[:])
			return hex.EncodeToString(b[:])
		}
	}
	return &Rotation{s: s, name: name, r: r, token: newID()}
}

// VersionID returns the id of the version the rotation creates.
func (ro *Rotation) VersionID() string { return ro.token }

func (ro *Rotation) current() (RDSSecret, error) {
	v, _, ok := ro.s.Value(ro.name, StageCurrent)
	if !ok {
		return RDSSecret{}, fmt.Errorf("secretsmanagertest: secret %q has no AWSCURRENT version", ro.name)
	}
	return ParseRDSSecret(v)
}

func (ro *Rotation) pending() (RDSSecret, error) {
	v, id, ok := ro.s.Value(ro.name, StagePending)
	if !ok || id != ro.token {
		return RDSSecret{}, ErrNoPending
	}
	return ParseRDSSecret(v)
}

// CreateSecret stores new credentials as the AWSPENDING version: the same
// user with a new password (SingleUser), or the other user with a new
// password (AlternatingUsers).
func (ro *Rotation) CreateSecret(context.Context) error {
	cur, err := ro.current()
	if err != nil {
		return err
	}
	next := cur
	next.Password = ro.r.NewPassword()
	if ro.r.Strategy == AlternatingUsers {
		if base, ok := strings.CutSuffix(cur.Username, ro.r.CloneSuffix); ok {
			next.Username = base
		} else {
			next.Username = cur.Username + ro.r.CloneSuffix
		}
	}
	ro.s.mu.Lock()
	defer ro.s.mu.Unlock()
	sec := ro.s.secrets[ro.name]
	if sec == nil {
		return fmt.Errorf("secretsmanagertest: secret %q does not exist", ro.name)
	}
	sec.put(ro.token, next.JSON(), []string{StagePending})
	return nil
}

// SetSecret changes the password in the database (Rotator.SetSecret).
// From now on, with SingleUser, the AWSCURRENT credentials are refused.
func (ro *Rotation) SetSecret(ctx context.Context) error {
	pending, err := ro.pending()
	if err != nil {
		return err
	}
	cur, err := ro.current()
	if err != nil {
		return err
	}
	if ro.r.SetSecret == nil {
		return fmt.Errorf("secretsmanagertest: Rotator.SetSecret is nil")
	}
	return ro.r.SetSecret(ctx, pending, cur)
}

// TestSecret logs in with the AWSPENDING credentials (Rotator.TestSecret),
// if set.
func (ro *Rotation) TestSecret(ctx context.Context) error {
	pending, err := ro.pending()
	if err != nil {
		return err
	}
	if ro.r.TestSecret == nil {
		return nil
	}
	return ro.r.TestSecret(ctx, pending)
}

// FinishSecret moves AWSCURRENT to the new version (the old one becomes
// AWSPREVIOUS) and removes its AWSPENDING label.
func (ro *Rotation) FinishSecret(context.Context) error {
	ro.s.mu.Lock()
	defer ro.s.mu.Unlock()
	sec := ro.s.secrets[ro.name]
	if sec == nil {
		return fmt.Errorf("secretsmanagertest: secret %q does not exist", ro.name)
	}
	v := sec.versions[ro.token]
	if v == nil {
		return ErrNoPending
	}
	sec.moveStage(StageCurrent, ro.token)
	v.stages = deleteStage(v.stages, StagePending)
	return nil
}

func deleteStage(stages []string, stage string) []string {
	out := stages[:0]
	for _, s := range stages {
		if s != stage {
			out = append(out, s)
		}
	}
	return out
}
