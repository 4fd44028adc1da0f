package secretsmanagertest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// The version stages of Secrets Manager.
const (
	StageCurrent  = "AWSCURRENT"
	StagePending  = "AWSPENDING"
	StagePrevious = "AWSPREVIOUS"
)

// Region and Account name the fake's ARNs.
const (
	Region  = "us-east-1"
	Account = "123456789012"
)

// Server is a fake AWS Secrets Manager: an HTTP server speaking the
// service's AWS JSON 1.1 protocol (POST /, X-Amz-Target
// "secretsmanager.<Operation>"), for the real SDK client pointed at URL.
// It accepts any SigV4 signature. Safe for concurrent use.
type Server struct {
	// URL is the endpoint to give the SDK client (BaseEndpoint).
	URL string

	srv *httptest.Server

	mu       sync.Mutex
	secrets  map[string]*secret // by name
	faults   []fault
	latency  time.Duration
	calls    map[string]int // by operation
	requests []Request
}

// Request is one request the fake answered, for assertions.
type Request struct {
	Operation    string // "GetSecretValue"
	SecretID     string
	VersionStage string
	Status       int // the HTTP status answered
}

type secret struct {
	name     string
	arn      string
	versions map[string]*version // by id
	order    []string            // version ids in creation order
}

type version struct {
	id      string
	value   string
	stages  []string
	created time.Time
}

// fault is an injected error answer.
type fault struct {
	op     string // "" every operation
	code   string
	status int
	left   int // answers left; <0 forever
}

// New starts a fake Secrets Manager; Close stops it.
func New() *Server {
	s := &Server{secrets: map[string]*secret{}, calls: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server and waits for its requests to end.
func (s *Server) Close() { s.srv.Close() }

// CreateSecret creates a secret named name whose AWSCURRENT version holds
// value (the secret string, e.g. the RDS JSON of [RDSSecret.JSON]), and
// returns the version id. An existing secret of that name is replaced.
func (s *Server) CreateSecret(name, value string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := &secret{name: name, arn: arnOf(name), versions: map[string]*version{}}
	s.secrets[name] = sec
	return sec.put(newID(), value, []string{StageCurrent})
}

// DeleteSecret deletes the secret at once (ForceDeleteWithoutRecovery):
// every later request for it answers 400 ResourceNotFoundException.
func (s *Server) DeleteSecret(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.secrets, name)
}

// Throttle makes the next n requests of operation op ("" any) answer 400
// ThrottlingException ("Rate exceeded"); n < 0: every one, until
// ClearFaults.
func (s *Server) Throttle(op string, n int) {
	s.Fail(op, "ThrottlingException", http.StatusBadRequest, n)
}

// Fail makes the next n requests of operation op ("" any) answer status
// with the error code (the body's __type), e.g. "InternalServiceError"
// 500 or "AccessDeniedException" 400; n < 0: every one, until
// ClearFaults. Faults are used in the order they were added.
func (s *Server) Fail(op, code string, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{op: op, code: code, status: status, left: n})
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// SetLatency delays every answer by d (0: none), so that concurrent
// callers overlap.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls returns how many requests of operation op ("" every operation)
// the fake answered, faults included.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op == "" {
		n := 0
		for _, c := range s.calls {
			n += c
		}
		return n
	}
	return s.calls[op]
}

// Requests returns the requests answered so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Value returns the secret string of the version of name that has stage,
// and its id; ok is false when there is none.
func (s *Server) Value(name, stage string) (value, versionID string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.secrets[name]
	if sec == nil {
		return "", "", false
	}
	v := sec.withStage(stage)
	if v == nil {
		return "", "", false
	}
	return v.value, v.id, true
}

// Stages returns the stages of every version of name, by version id.
func (s *Server) Stages(name string) map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	if sec := s.secrets[name]; sec != nil {
		for id, v := range sec.versions {
			if len(v.stages) > 0 {
				out[id] = slices.Clone(v.stages)
			}
		}
	}
	return out
}

func arnOf(name string) string {
	return fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", Region, Account, name, newID()[:6])
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// put adds a version with stages, moving each stage from the version that
// had it (AWSCURRENT's old version becomes AWSPREVIOUS). s.mu is held.
func (sec *secret) put(id, value string, stages []string) string {
	if v := sec.versions[id]; v != nil {
		v.value = value
	} else {
		sec.versions[id] = &version{id: id, value: value, created: time.Now()}
		sec.order = append(sec.order, id)
	}
	for _, st := range stages {
		sec.moveStage(st, id)
	}
	return id
}

// moveStage puts stage on version id, removing it from the version that
// had it; moving AWSCURRENT makes its old version AWSPREVIOUS. s.mu is held.
func (sec *secret) moveStage(stage, id string) {
	old := sec.withStage(stage)
	if old != nil && old.id == id {
		return
	}
	if old != nil {
		old.stages = slices.DeleteFunc(old.stages, func(s string) bool { return s == stage })
		if stage == StageCurrent {
			if prev := sec.withStage(StagePrevious); prev != nil {
				prev.stages = slices.DeleteFunc(prev.stages, func(s string) bool { return s == StagePrevious })
			}
			old.stages = append(old.stages, StagePrevious)
		}
	}
	v := sec.versions[id]
	v.stages = append(v.stages, stage)
	if stage == StageCurrent {
		v.stages = slices.DeleteFunc(v.stages, func(s string) bool { return s == StagePrevious })
	}
}

func (sec *secret) withStage(stage string) *version {
	for _, id := range sec.order {
		if v := sec.versions[id]; slices.Contains(v.stages, stage) {
			return v
		}
	}
	return nil
}

// apiError is an error answer of the service.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func notFound(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", msg: msg}
}

func invalid(code, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, msg: msg}
}

// serve answers one request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "secretsmanager.")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var in map[string]any
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &in)
	}
	var out any
	aerr := &apiError{}
	switch {
	case r.Method != http.MethodPost || !ok:
		aerr = invalid("UnknownOperationException", "want POST / with X-Amz-Target secretsmanager.<Operation>")
	case err != nil:
		aerr = invalid("SerializationException", "the body is not a JSON object")
	default:
		aerr = nil
	}
	str := func(k string) string { v, _ := in[k].(string); return v }

	s.mu.Lock()
	s.calls[op]++
	latency := s.latency
	if aerr == nil {
		aerr = s.fault(op)
	}
	if aerr == nil {
		out, aerr = s.handle(op, str, in)
	}
	status := http.StatusOK
	if aerr != nil {
		status = aerr.status
	}
	s.requests = append(s.requests, Request{Operation: op, SecretID: str("SecretId"), VersionStage: str("VersionStage"), Status: status})
	s.mu.Unlock()

	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", newID())
	if aerr != nil {
		w.Header().Set("X-Amzn-Errortype", aerr.code)
		w.WriteHeader(aerr.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": aerr.code, "message": aerr.msg})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// fault returns the next injected fault for op, if any. s.mu is held.
func (s *Server) fault(op string) *apiError {
	for i := range s.faults {
		f := &s.faults[i]
		if f.left == 0 || (f.op != "" && f.op != op) {
			continue
		}
		if f.left > 0 {
			f.left--
		}
		msg := "injected"
		if f.code == "ThrottlingException" {
			msg = "Rate exceeded"
		}
		return &apiError{status: f.status, code: f.code, msg: msg}
	}
	return nil
}

// handle runs one operation. s.mu is held.
func (s *Server) handle(op string, str func(string) string, in map[string]any) (any, *apiError) {
	id := str("SecretId")
	find := func() (*secret, *apiError) {
		if id == "" {
			return nil, invalid("InvalidParameterException", "SecretId is required")
		}
		for _, sec := range s.secrets {
			if sec.name == id || sec.arn == id {
				return sec, nil
			}
		}
		return nil, notFound("Secrets Manager can't find the specified secret.")
	}
	switch op {
	case "GetSecretValue":
		sec, err := find()
		if err != nil {
			return nil, err
		}
		var v *version
		switch vid, stage := str("VersionId"), str("VersionStage"); {
		case vid != "":
			v = sec.versions[vid]
			if v != nil && stage != "" && !slices.Contains(v.stages, stage) {
				return nil, invalid("InvalidRequestException", "the version does not have that staging label")
			}
		default:
			if stage == "" {
				stage = StageCurrent
			}
			v = sec.withStage(stage)
			if v == nil {
				return nil, notFound("Secrets Manager can't find the specified secret value for staging label: " + stage)
			}
		}
		if v == nil {
			return nil, notFound("Secrets Manager can't find the specified secret value for VersionId")
		}
		return map[string]any{
			"ARN": sec.arn, "Name": sec.name, "VersionId": v.id, "SecretString": v.value,
			"VersionStages": v.stages, "CreatedDate": float64(v.created.UnixMilli()) / 1000,
		}, nil
	case "DescribeSecret":
		sec, err := find()
		if err != nil {
			return nil, err
		}
		stages := map[string][]string{}
		for vid, v := range sec.versions {
			if len(v.stages) > 0 {
				stages[vid] = v.stages
			}
		}
		return map[string]any{"ARN": sec.arn, "Name": sec.name, "VersionIdsToStages": stages}, nil
	case "PutSecretValue":
		sec, err := find()
		if err != nil {
			return nil, err
		}
		vid := cmpOr(str("ClientRequestToken"), newID())
		stages := []string{StageCurrent}
		if raw, ok := in["VersionStages"].([]any); ok {
			stages = stages[:0]
			for _, x := range raw {
				if st, ok := x.(string); ok {
					stages = append(stages, st)
				}
			}
		}
		sec.put(vid, str("SecretString"), stages)
		return map[string]any{"ARN": sec.arn, "Name": sec.name, "VersionId": vid, "VersionStages": sec.versions[vid].stages}, nil
	case "UpdateSecretVersionStage":
		sec, err := find()
		if err != nil {
			return nil, err
		}
		stage, to, from := str("VersionStage"), str("MoveToVersionId"), str("RemoveFromVersionId")
		if stage == "" {
			return nil, invalid("InvalidParameterException", "VersionStage is required")
		}
		if cur := sec.withStage(stage); cur != nil && to != "" && cur.id != to && cur.id != from {
			return nil, invalid("InvalidParameterException", "the staging label is attached to another version: name it in RemoveFromVersionId")
		}
		switch {
		case to != "":
			if sec.versions[to] == nil {
				return nil, notFound("Secrets Manager can't find the version " + to)
			}
			sec.moveStage(stage, to)
		case from != "":
			if v := sec.versions[from]; v != nil {
				v.stages = slices.DeleteFunc(v.stages, func(s string) bool { return s == stage })
			}
		}
		return map[string]any{"ARN": sec.arn, "Name": sec.name}, nil
	}
	return nil, invalid("UnknownOperationException", "the fake does not implement "+op)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ErrNoPending is returned by a rotation step that needs an AWSPENDING
// version when there is none.
var ErrNoPending = errors.New("secretsmanagertest: no AWSPENDING version: run CreateSecret first")
