package bluegreentest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The form of an RDS IAM authentication token: what
// github.com/aws/aws-sdk-go-v2/feature/rds/auth.BuildAuthToken returns, a
// SigV4-presigned GET of https://host:port?Action=connect&DBUser=user,
// without the scheme.
const (
	tokenAlgorithm = "AWS4-HMAC-SHA256"
	tokenService   = "rds-db"
	tokenDate      = "20060102T150405Z"
	tokenLifetime  = 15 * time.Minute
	// TokenAccessKeyID is the access key id in the tokens [IAMToken] makes.
	TokenAccessKeyID = "AKIAHOLDFASTFAKE0000"
)

// IAMToken returns a token of the form RDS IAM authentication uses, as
// rdsiam mints it: a SigV4-presigned "connect" URL for user at endpoint
// ("host:port"), in region, signed now and valid for 15 minutes, with
// TokenAccessKeyID and a made-up signature. An Env with Config.IAM
// accepts it while endpoint's host is a name the server answers to. Use
// it where rdsiam (and the AWS SDK) is not wanted.
func IAMToken(endpoint, region, user string) string {
	now := time.Now().UTC()
	day := now.Format("20060102")
	q := url.Values{}
	q.Set("Action", "connect")
	q.Set("DBUser", user)
	q.Set("X-Amz-Algorithm", tokenAlgorithm)
	q.Set("X-Amz-Credential", TokenAccessKeyID+"/"+day+"/"+region+"/"+tokenService+"/aws4_request")
	q.Set("X-Amz-Date", now.Format(tokenDate))
	q.Set("X-Amz-Expires", strconv.Itoa(int(tokenLifetime/time.Second)))
	q.Set("X-Amz-SignedHeaders", "host")
	mac := hmac.New(sha256.New, []byte("holdfast fake signing key"))
	mac.Write([]byte(endpoint + "\n" + user + "\n" + now.Format(tokenDate)))
	q.Set("X-Amz-Signature", hex.EncodeToString(mac.Sum(nil)))
	return endpoint + "?" + q.Encode()
}

// iamToken is what the front end reads from a token.
type iamToken struct {
	host string
	port int
}

// parseToken checks that token has the form of an RDS IAM token for user
// in region, valid at now, and returns what it was signed for.
func parseToken(token, user, region string, now time.Time) (iamToken, error) {
	u, err := url.Parse("https://" + token)
	if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" {
		return iamToken{}, errors.New("not an RDS IAM token (a presigned URL host:port?Action=connect&...)")
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return iamToken{}, fmt.Errorf("token for %q: no port", u.Host)
	}
	q := u.Query()
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	switch {
	case q.Get("Action") != "connect":
		return iamToken{}, errors.New("token: Action is not connect")
	case q.Get("DBUser") != user:
		return iamToken{}, fmt.Errorf("token for user %q, not %q", q.Get("DBUser"), user)
	case q.Get("X-Amz-Algorithm") != tokenAlgorithm:
		return iamToken{}, errors.New("token: not signed with " + tokenAlgorithm)
	case len(cred) != 5 || cred[2] != region || cred[3] != tokenService || cred[4] != "aws4_request":
		return iamToken{}, fmt.Errorf("token: credential scope is not <key>/<date>/%s/%s/aws4_request", region, tokenService)
	case !slices.Contains(strings.Split(q.Get("X-Amz-SignedHeaders"), ";"), "host"):
		return iamToken{}, errors.New("token: the host is not signed")
	case q.Get("X-Amz-Signature") == "":
		return iamToken{}, errors.New("token: no signature")
	}
	at, err := time.Parse(tokenDate, q.Get("X-Amz-Date"))
	if err != nil {
		return iamToken{}, errors.New("token: bad X-Amz-Date")
	}
	secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || secs <= 0 || secs > 900 {
		return iamToken{}, errors.New("token: bad X-Amz-Expires")
	}
	if now.Before(at.Add(-5*time.Minute)) || now.After(at.Add(time.Duration(secs)*time.Second)) {
		return iamToken{}, fmt.Errorf("token signed at %s: expired or not yet valid", at.Format(time.RFC3339))
	}
	return iamToken{host: strings.ToLower(u.Hostname()), port: port}, nil
}

// checkToken checks a password presented to s by user: an RDS IAM token
// signed for a name s answers to now, on its port.
func (e *Env) checkToken(s *Server, user, password string) error {
	region := e.cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	tok, err := parseToken(password, user, region, time.Now())
	if err != nil {
		return err
	}
	if tok.port != s.Port {
		return fmt.Errorf("token signed for port %d, the server listens on %d", tok.port, s.Port)
	}
	if !slices.Contains(e.answers(s, false), tok.host) {
		return fmt.Errorf("token signed for %s, which is not a name of the %s server now", net.JoinHostPort(tok.host, strconv.Itoa(tok.port)), s.Name)
	}
	return nil
}

// answers returns the names s answers to now, of every deployment: for
// IAM (cert false), or in its certificate (cert true), which a switchover
// renews after the rename.
func (e *Env) answers(s *Server, cert bool) []string {
	e.mu.Lock()
	deps := make([]*Deployment, 0, len(e.deps))
	for d := range e.deps {
		deps = append(deps, d)
	}
	e.mu.Unlock()
	var names []string
	for _, d := range deps {
		names = append(names, d.answers(s, cert)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
