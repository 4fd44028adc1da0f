package obs

import (
	"regexp"
	"strings"
	"sync"
)

// Redacted replaces every secret [Redactor.Redact] removes.
const Redacted = "[redacted]"

// maxSecrets is how many distinct secrets a Redactor remembers; the oldest
// is forgotten first. A factory's secrets are its pools' static passwords
// and the IAM tokens it fetched recently.
const maxSecrets = 16

// Redactor removes secrets from text bound for a log line. It knows two
// kinds: values registered with Add (passwords and tokens the factory has
// handled), replaced wherever they occur; and passwords in connection
// strings (key=value "password=..." and URL "user:password@"), replaced
// whatever they are, as pgx does in its ParseConfigError.
//
// The zero value is ready to use. A Redactor is safe for concurrent use;
// Redact takes a lock, so keep it off hot paths (holdfast calls it only when
// it writes a log line about a failure).
type Redactor struct {
	mu      sync.Mutex
	secrets []string // ring of the last maxSecrets distinct values
	next    int
}

// Add registers s. Values shorter than 4 bytes are ignored: they would
// redact ordinary words.
func (r *Redactor) Add(s string) {
	if len(s) < 4 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.secrets {
		if v == s {
			return
		}
	}
	if len(r.secrets) < maxSecrets {
		r.secrets = append(r.secrets, s)
		return
	}
	r.secrets[r.next] = s
	r.next = (r.next + 1) % maxSecrets
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
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
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
