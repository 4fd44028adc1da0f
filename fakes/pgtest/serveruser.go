package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// What the code that runs PostgreSQL servers shares (this package,
// fakes/failovertest, the fault suite): the OS user to run the server
// programs as, and postgresql.conf quoting.

// ServerUser returns the credential the harness runs PostgreSQL programs
// with: nil when the process is not root, else the "postgres" OS user's,
// or "nobody"'s (PostgreSQL refuses to run as root). A test that prepares
// a directory for a server (a replica's, a certificate's) chowns it to
// that user.
func ServerUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("running as root and found neither a \"postgres\" nor a \"nobody\" OS user to run the server as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %q: %w", u.Username, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}
	// In a user namespace where setgroups is denied, setting Groups fails;
	// keep the inherited groups instead.
	if b, err := os.ReadFile("/proc/self/setgroups"); err == nil && strings.TrimSpace(string(b)) == "deny" {
		cred.Groups, cred.NoSetGroups = nil, true
	}
	return cred, nil
}

// QuoteConf quotes v as a postgresql.conf string value, for
// Options.Settings and the files a test writes itself.
func QuoteConf(v string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", "''") + "'"
}

// appendFile appends text to the existing file name.
func appendFile(name, text string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
