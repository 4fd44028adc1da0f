package gcpfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TokenLifetime is the lifetime of every token the fakes mint. Tokens must
// have an expiry: the connectors clamp or check their client certificates
// against the login token's, and a token without one makes every dial
// force a refresh.
const TokenLifetime = time.Hour

// Tokens mints opaque OAuth2 tokens of two kinds, for an Admin API and for
// IAM database login, and remembers them so that a fake can check what a
// request carries. It is safe for concurrent use.
type Tokens struct {
	// Login is the scope that asks for a login token; any other asks for
	// an Admin API token.
	Login string

	mu    sync.Mutex
	api   map[string]time.Time
	login map[string]time.Time
}

// NewTokens returns a minter whose login tokens are those asked for with
// scope login.
func NewTokens(login string) *Tokens {
	return &Tokens{Login: login, api: map[string]time.Time{}, login: map[string]time.Time{}}
}

// Mint returns a new token of the kind (login or Admin API) and its expiry.
func (t *Tokens) Mint(login bool) (string, time.Time) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	exp := time.Now().Add(TokenLifetime)
	prefix := "fake-api-"
	if login {
		prefix = "fake-login-"
	}
	tok := prefix + hex.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	if login {
		t.login[tok] = exp
	} else {
		t.api[tok] = exp
	}
	return tok, exp
}

// Valid reports whether tok is an unexpired token of the kind minted here.
func (t *Tokens) Valid(login bool, tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.api
	if login {
		m = t.login
	}
	exp, ok := m[tok]
	return ok && time.Now().Before(exp)
}

// ValidBearer reports whether r carries an unexpired Admin API token minted
// here as its bearer token.
func (t *Tokens) ValidBearer(r *http.Request) bool {
	tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return found && t.Valid(false, tok)
}

// Serve answers r as an OAuth2 token endpoint (client credentials grant).
// The scope says which kind of token is asked for; inject counts the
// request for that kind and returns the status to fail it with (0: none),
// or ok=false when it has already answered.
func (t *Tokens) Serve(w http.ResponseWriter, r *http.Request, inject func(login bool) (status int, ok bool)) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		TokenError(w, http.StatusBadRequest)
		return
	}
	login := strings.Contains(r.PostForm.Get("scope"), t.Login)
	status, ok := inject(login)
	if !ok {
		return
	}
	if status != 0 {
		TokenError(w, status)
		return
	}
	if r.PostForm.Get("grant_type") != "client_credentials" {
		TokenError(w, http.StatusBadRequest)
		return
	}
	tok, exp := t.Mint(login)
	WriteJSON(w, http.StatusOK, map[string]any{
		"access_token": tok,
		"token_type":   "Bearer",
		"expires_in":   int(time.Until(exp).Seconds()),
	})
}

// TokenError answers as an OAuth2 token endpoint does: a JSON error for 400
// ("invalid_grant") and 401 ("invalid_client"), plain text otherwise.
func TokenError(w http.ResponseWriter, code int) {
	switch code {
	case http.StatusBadRequest:
		WriteJSON(w, code, map[string]string{"error": "invalid_grant", "error_description": "Invalid grant: account not found"})
	case http.StatusUnauthorized:
		WriteJSON(w, code, map[string]string{"error": "invalid_client", "error_description": "The OAuth client was not found."})
	default:
		http.Error(w, http.StatusText(code), code)
	}
}

// TokenSource returns an OAuth2 token source that fetches tokens with the
// client credentials grant from tokenURL, asking for scope, through
// client. Like Google's token sources, it caches its token until it
// expires. A failed fetch returns *oauth2.RetrieveError with its Response
// set.
func TokenSource(client *http.Client, tokenURL, scope string) oauth2.TokenSource {
	cc := clientcredentials.Config{
		ClientID:     "holdfast-fake-client",
		ClientSecret: "holdfast-fake-secret",
		TokenURL:     tokenURL,
		Scopes:       []string{scope},
		AuthStyle:    oauth2.AuthStyleInParams, // one request per fetch, no style probing
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	return cc.TokenSource(ctx)
}

// FailingSource is a token source that always fails with Err.
type FailingSource struct{ Err error }

// Token returns f.Err.
func (f FailingSource) Token() (*oauth2.Token, error) { return nil, f.Err }
