package obs

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Redacted replaces every secret [Redactor.Redact] removes.
const Redacted = "[redacted]"

// ringBase is how many distinct fetched secrets (tokens, rotated
// passwords) a Redactor remembers with no pinned secret; each pinned one
// (a pool's configured password) adds ringPerPool. The oldest fetched one
// is forgotten first; a pinned one never is.
const (
	ringBase    = 16
	ringPerPool = 16
)

// Redactor removes secrets from text bound for a log line or an error. It
// knows three kinds: values pinned with Pin (the configured passwords of
// the factory's pools), kept for the Redactor's life; values added with
// Add (tokens and credentials the factory fetched), of which it keeps the
// most recent, more the more pools it has; and passwords in connection
// strings (key=value "password=..." and URL "user:password@"), replaced
// whatever they are, as pgx does in its ParseConfigError. A secret that
// holdfast never handled (a text a user's function made up, an ARN in its
// error) is not known to it.
//
// The zero value is ready to use. A Redactor is safe for concurrent use;
// Redact takes a lock, so keep it off hot paths (holdfast calls it only when
// it writes a log line about a failure, or returns an error).
type Redactor struct {
	mu     sync.Mutex
	pinned []string // never forgotten
	ring   []string // the last fetched values, distinct
	next   int
}

// Pin registers s for good (a pool's configured password): it is never
// pushed out by fetched values, and the ring of those grows by
// ringPerPool. Values shorter than 4 bytes are ignored: they would redact
// ordinary words.
func (r *Redactor) Pin(s string) {
	if len(s) < 4 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.pinned, s) {
		r.pinned = append(r.pinned, s)
	}
}

// Add registers s, a fetched value, in the ring. Values shorter than 4
// bytes are ignored.
func (r *Redactor) Add(s string) {
	if len(s) < 4 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.pinned, s) || slices.Contains(r.ring, s) {
		return
	}
	if size := ringBase + ringPerPool*len(r.pinned); len(r.ring) < size {
		r.ring = append(r.ring, s)
		return
	}
	r.ring[r.next] = s
	r.next = (r.next + 1) % len(r.ring)
}

var (
	// password=value in a key=value connection string, value bare or quoted.
	kvPassword = regexp.MustCompile(`(?i)\b((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]+)`)
	// scheme://user:password@ in a URL.
	urlPassword = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@\s]*@`)
)

// Redact returns s with every registered secret and every connection-string
// password replaced by [Redacted].
func (r *Redactor) Redact(s string) string {
	r.mu.Lock()
	for _, set := range [...][]string{r.pinned, r.ring} {
		for _, v := range set {
			if strings.Contains(s, v) {
				s = strings.ReplaceAll(s, v, Redacted)
			}
		}
	}
	r.mu.Unlock()
	if strings.Contains(s, "=") {
		s = kvPassword.ReplaceAllString(s, "${1}"+Redacted)
	}
	if strings.Contains(s, "://") {
		s = urlPassword.ReplaceAllString(s, "${1}"+Redacted+"@")
	}
	return s
}
