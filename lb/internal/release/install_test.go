package release

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

const (
	modulePath = "github.com/holdfast-db/holdfast/lb"
	version    = "v0.1.0" // the version the proxy serves; any will do
)

// lbDir is the lb module's directory: two levels up.
func lbDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(d, "go.mod"))
	if err != nil || modfile.ModulePath(b) != modulePath {
		t.Skipf("not in the lb module's source tree (%s)", d)
	}
	return d
}

// goTool is the go command: the one running the tests ($GOROOT/bin/go,
// which go test puts first on PATH), else go on PATH.
func goTool(t *testing.T) string {
	t.Helper()
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	return p
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// goCmd runs the go command in dir with env added to the environment.
func goCmd(t *testing.T, ctx context.Context, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, goTool(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// The go.mod a release is tagged with: no replace directive (go install
// refuses them), no requirement on the root module (lb resolves alone).
func TestGoModIsReleasable(t *testing.T) {
	dir := lbDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Replace) > 0 || len(f.Exclude) > 0 {
		t.Errorf("go.mod has replace or exclude directives: go install refuses a module with them")
	}
	for _, r := range f.Require {
		if r.Mod.Path == "github.com/holdfast-db/holdfast" || strings.HasPrefix(r.Mod.Version, "v0.0.0-00010101000000") {
			t.Errorf("go.mod requires %s %s, which no proxy serves", r.Mod.Path, r.Mod.Version)
		}
	}
}

// proxy is a file-system module proxy serving lb at version, zipped from
// this checkout as the module mirror would serve a tag, and lb's
// dependencies from the module cache, and the environment that makes the
// go command use it and nothing else.
type proxy struct {
	dir string   // lb's source tree
	tmp string   // the test's temporary directory
	env []string // GOWORK=off, GOPROXY=the proxy,the module cache, ...
}

// newProxy builds the proxy in a temporary directory of t's.
func newProxy(t *testing.T, ctx context.Context) *proxy {
	t.Helper()
	dir := lbDir(t)
	tmp := t.TempDir()

	// lb's dependencies are in the module cache (with the network the
	// machine has: CI downloaded them to run these tests).
	goCmd(t, ctx, dir, []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}, "mod", "download")
	cache := strings.TrimSpace(goCmd(t, ctx, dir, nil, "env", "GOMODCACHE"))

	// The proxy: lb at version, zipped from this tree as a tag would be.
	root := filepath.Join(tmp, "proxy")
	esc, err := module.EscapePath(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(root, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	m := module.Version{Path: modulePath, Version: version}
	zf, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.CreateFromDir(zf, m, dir); err != nil {
		zf.Close()
		t.Fatalf("zipping the lb module: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".mod": gomod, version + ".info": info} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &proxy{dir: dir, tmp: tmp, env: []string{
		"GOWORK=off",
		"GOFLAGS=-modcacherw",
		// lb from the proxy, its dependencies from the module cache, and
		// nothing else: GOPROXY has no network entry. The checksum
		// database is off (it is a network service): the dependencies
		// are the module cache's, which go mod download above checked
		// against lb's go.sum.
		"GOPROXY=file://" + filepath.ToSlash(root) + ",file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOSUMDB=off",
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOTOOLCHAIN=local",
	}}
}

// user returns the environment of a user of the proxy named name: outside
// any module and the repository, with no workspace, a fresh module cache
// and GOPATH, and HOME, in directories of their own.
func (p *proxy) user(t *testing.T, name string) (home string, env []string) {
	t.Helper()
	base := filepath.Join(p.tmp, name)
	home = filepath.Join(base, "home")
	for _, d := range []string{home, filepath.Join(base, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home, append(slices.Clone(p.env),
		"GOMODCACHE="+filepath.Join(base, "modcache"),
		"GOPATH="+filepath.Join(base, "gopath"),
		"GOBIN="+filepath.Join(base, "bin"),
		"HOME="+home,
	)
}

// noRootModule fails t if the module cache of the user in base fetched
// the root module, github.com/holdfast-db/holdfast.
func noRootModule(t *testing.T, base string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(base, "modcache", "cache", "download", "github.com", "holdfast-db", "holdfast", "@v")); err == nil {
		t.Errorf("the module cache holds the root module github.com/holdfast-db/holdfast: lb needed it")
	}
}

// A release of lb, served by a module proxy, installs and is required as
// its users do, outside the repository and any workspace: go install of
// its command (at the version and @latest) and go get of the module into
// a module of the user's, built and vetted.
func TestInstallFromModuleProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds holdfast-lb and a module using lb from scratch; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	p := newProxy(t, ctx)
	// One user, who installs the command, then requires the module: the
	// second build reuses the first's module cache and compiled packages.
	home, env := p.user(t, "user")
	defer goCmd(t, ctx, home, env, "clean", "-modcache")

	t.Run("go install", func(t *testing.T) {
		for _, v := range []string{version, "latest"} {
			start := time.Now()
			goCmd(t, ctx, home, env, "install", modulePath+"/cmd/holdfast-lb@"+v)
			t.Logf("go install %s/cmd/holdfast-lb@%s from the file proxy: %s", modulePath, v, time.Since(start).Round(time.Millisecond))
		}
		exe := filepath.Join(p.tmp, "user", "bin", "holdfast-lb")
		out, err := exec.CommandContext(ctx, exe, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "holdfast-lb "+version+" ") {
			t.Errorf("holdfast-lb version = %q, %v; want the proxy's %s", out, err, version)
		}
		out, err = exec.CommandContext(ctx, exe, "-config", filepath.Join(p.dir, "cmd", "holdfast-lb", "testdata", "lb.json"), "check-config").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok: 2 balancers, 2 groups, 3 operators") {
			t.Errorf("the installed holdfast-lb check-config: %q, %v", out, err)
		}
		noRootModule(t, filepath.Join(p.tmp, "user"))
	})

	t.Run("go get", func(t *testing.T) {
		// A module of the user's, outside the repository, that imports lb
		// and a balancer package: go get github.com/holdfast-db/holdfast/lb
		// (@latest: what the README's Install says), then build, vet and
		// run it.
		app := filepath.Join(home, "app")
		if err := os.MkdirAll(app, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{
			"go.mod": "module example.com/app\n\ngo 1.26.0\n",
			"main.go": `package main

import (
	"fmt"

	"github.com/holdfast-db/holdfast/lb"
	"github.com/holdfast-db/holdfast/lb/f5"
)

func main() {
	_, err := f5.New(f5.Config{})
	fmt.Println(lb.Member{Pool: "web", Node: "web-1", Port: 80}, lb.Enabled, err != nil)
}
`,
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(app, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		goCmd(t, ctx, app, env, "get", modulePath)
		gomod, err := os.ReadFile(filepath.Join(app, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse("go.mod", gomod, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, r := range f.Require {
			if r.Mod.Path == modulePath {
				got = r.Mod.Version
			}
			if r.Mod.Path == "github.com/holdfast-db/holdfast" {
				t.Errorf("go get of lb added a requirement on the root module: %s", r.Mod)
			}
		}
		if got != version {
			t.Errorf("go get %s: go.mod requires it at %q, want the proxy's %s\n%s", modulePath, got, version, gomod)
		}
		goCmd(t, ctx, app, env, "mod", "tidy")
		goCmd(t, ctx, app, env, "build", "./...")
		goCmd(t, ctx, app, env, "vet", "./...")
		if all := goCmd(t, ctx, app, env, "list", "-m", "all"); strings.Contains(all, "github.com/holdfast-db/holdfast ") {
			t.Errorf("the module graph of a user of lb holds the root module:\n%s", all)
		}
		if out := goCmd(t, ctx, app, env, "run", "."); strings.TrimSpace(out) != "web/web-1:80 enabled true" {
			t.Errorf("the user's program printed %q", out)
		}
		noRootModule(t, filepath.Join(p.tmp, "user"))
	})
}
