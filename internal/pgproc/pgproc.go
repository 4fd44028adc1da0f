// Package pgproc holds what the code that runs PostgreSQL servers shares
// (fakes/pgtest, fakes/failovertest, the fault suite): the OS user to run
// the server programs as, and postgresql.conf editing.
package pgproc

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// ServerUser returns the credential to run PostgreSQL programs with: nil
// when the process is not root, else the "postgres" OS user's, or
// "nobody"'s (PostgreSQL refuses to run as root).
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

// QuoteConf quotes v as a postgresql.conf string value.
func QuoteConf(v string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", "''") + "'"
}

// AppendFile appends text to the existing file name.
func AppendFile(name, text string) error {
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
