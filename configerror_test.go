package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
)

// ConfigError is a real type of this package with documented fields, as
// go doc shows it (issue 29, item 5): not an alias of an internal type
// ("%T" printed *cfgerr.Error and go doc hid the fields). Every
// configuration error a user gets, of whichever package and wrapped or
// not, is one: "%T" says *holdfast.ConfigError, one errors.As finds it
// (under any package's name for it), errors.Is matches ErrInvalidConfig.
func TestConfigErrorIsOneType(t *testing.T) {
	t.Parallel()
	t.Run("go doc", func(t *testing.T) {
		fset := token.NewFileSet()
		names, err := filepath.Glob("*.go")
		if err != nil {
			t.Fatal(err)
		}
		var files []*ast.File
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		p, err := doc.NewFromFiles(fset, files, "github.com/holdfast-db/holdfast")
		if err != nil {
			t.Fatal(err)
		}
		var spec *ast.TypeSpec
		for _, ty := range p.Types {
			if ty.Name == "ConfigError" {
				spec = ty.Decl.Specs[0].(*ast.TypeSpec)
			}
		}
		if spec == nil {
			t.Fatal("no type ConfigError")
		}
		st, ok := spec.Type.(*ast.StructType)
		if spec.Assign.IsValid() || !ok {
			t.Fatalf("ConfigError is %s, want a struct type of this package", types(spec))
		}
		var fields []string
		for _, f := range st.Fields.List {
			for _, n := range f.Names {
				fields = append(fields, n.Name)
				if f.Doc == nil || f.Doc.Text() == "" {
					t.Errorf("field %s has no doc comment", n.Name)
				}
			}
		}
		if got := strings.Join(fields, ","); got != "Pkg,Field,Why,Err" {
			t.Errorf("fields %s, want Pkg,Field,Why,Err", got)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	partial := retry.Policy{MaxAttempts: 5}
	closed, err := holdfast.New()
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	f := newFactory(t)
	replacedDial, err := pgxpool.ParseConfig("postgres://u@127.0.0.1:1/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Configure(replacedDial); err != nil {
		t.Fatal(err)
	}
	replacedDial.ConnConfig.DialFunc = (&net.Dialer{}).DialContext // after Configure: refused at the first connect
	replacedPool, err := pgxpool.NewWithConfig(ctx, replacedDial)
	if err != nil {
		t.Fatal(err)
	}
	defer replacedPool.Close()

	cases := []struct {
		name  string
		err   error
		pkg   string // of the outer error
		inner string // the Pkg of a *ConfigError it wraps, if any
		say   string
	}{
		{name: "partial retry policy", err: newErr(holdfast.New(holdfast.WithRetryPolicy(partial))), pkg: "holdfast", say: "retry.Default()"},
		{name: "bluegreen.Config", err: newErr(holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{HighInterval: -1}))), pkg: "holdfast", inner: "bluegreen"},
		{name: "failover.Config", err: newErr(holdfast.New(holdfast.WithFailover(failover.Config{InstancePools: 7}))), pkg: "holdfast", inner: "failover"},
		{name: "PoolInstanceMode", err: f.Configure(mustConfig(t), holdfast.PoolInstanceMode(9)), pkg: "failover"},
		{name: "Configure after Close", err: closed.Configure(mustConfig(t)), pkg: "holdfast"},
		{name: "a DialFunc replaced after Configure, on a pool path", err: replacedPool.Ping(ctx), pkg: "holdfast", say: "DialFunc"},
		{name: "sqldb.Open", err: errOf(sqldb.Open(ctx, nil, nil)), pkg: "sqldb"},
		{name: "readiness.New", err: errOf(readiness.New(readiness.Config{})), pkg: "readiness"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.err
			if got := fmt.Sprintf("%T", err); got != "*holdfast.ConfigError" {
				t.Fatalf("%%T = %s (%v), want *holdfast.ConfigError", got, err)
			}
			var ce *holdfast.ConfigError
			var se *sqldb.ConfigError
			var re *readiness.ConfigError
			if !errors.As(err, &ce) || !errors.As(err, &se) || !errors.As(err, &re) || !errors.Is(err, holdfast.ErrInvalidConfig) ||
				!errors.Is(err, bluegreen.ErrInvalidConfig) || !errors.Is(err, sqldb.ErrInvalidConfig) {
				t.Fatalf("%v: not found by errors.As / errors.Is under every name", err)
			}
			if pkg := ce.Pkg; pkg != c.pkg && !(pkg == "" && c.pkg == "holdfast") {
				t.Errorf("Pkg = %q, want %q", pkg, c.pkg)
			}
			if c.inner != "" {
				if got := fmt.Sprintf("%T", ce.Err); got != "*holdfast.ConfigError" {
					t.Errorf("Err is a %s (%v), want another *holdfast.ConfigError", got, ce.Err)
				} else if inner := ce.Err.(*holdfast.ConfigError); inner.Pkg != c.inner {
					t.Errorf("Err.Pkg = %q, want %q", inner.Pkg, c.inner)
				}
			}
			if !strings.Contains(err.Error(), c.say) {
				t.Errorf("%q does not say %q", err, c.say)
			}
		})
	}
}

// types says what spec declares, for a failure message.
func types(spec *ast.TypeSpec) string {
	if spec.Assign.IsValid() {
		return fmt.Sprintf("an alias of %v", spec.Type)
	}
	return fmt.Sprintf("%T", spec.Type)
}

func mustConfig(t *testing.T) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig("postgres://u@127.0.0.1:1/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newErr is holdfast.New's error, its factory closed if there was one.
func newErr(f *holdfast.Factory, err error) error {
	if f != nil {
		f.Close()
	}
	return err
}

// errOf is the error of a constructor's two results.
func errOf[T any](_ T, err error) error { return err }
