package release

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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

func TestInstallFromModuleProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds holdfast-lb from scratch; skipped with -short")
	}
	dir := lbDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tmp := t.TempDir()

	// lb's dependencies are in the module cache (with the network the
	// machine has: CI downloaded them to run these tests).
	goCmd(t, ctx, dir, []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}, "mod", "download")
	cache := strings.TrimSpace(goCmd(t, ctx, dir, nil, "env", "GOMODCACHE"))

	// The proxy: lb at version, zipped from this tree as a tag would be.
	proxy := filepath.Join(tmp, "proxy")
	esc, err := module.EscapePath(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
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

	// Install as a user would, outside any module, with no workspace, a
	// fresh module cache and no network: the proxy, then the dependencies
	// the module cache holds.
	home := filepath.Join(tmp, "home")
	bin := filepath.Join(tmp, "bin")
	for _, d := range []string{home, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"GOWORK=off",
		"GOFLAGS=-modcacherw",
		// lb from the proxy, its dependencies from the module cache, and
		// nothing else: GOPROXY has no network entry. The checksum
		// database is off (it is a network service): the dependencies
		// are the module cache's, which go mod download above checked
		// against lb's go.sum.
		"GOPROXY=file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOSUMDB=off",
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOTOOLCHAIN=local",
		"GOMODCACHE=" + filepath.Join(tmp, "modcache"),
		"GOPATH=" + filepath.Join(tmp, "gopath"),
		"GOBIN=" + bin,
		"HOME=" + home,
	}
	for _, v := range []string{version, "latest"} {
		start := time.Now()
		goCmd(t, ctx, home, env, "install", modulePath+"/cmd/holdfast-lb@"+v)
		t.Logf("go install %s/cmd/holdfast-lb@%s from the file proxy: %s", modulePath, v, time.Since(start).Round(time.Millisecond))
	}

	exe := filepath.Join(bin, "holdfast-lb")
	out, err := exec.CommandContext(ctx, exe, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "holdfast-lb "+version+" ") {
		t.Errorf("holdfast-lb version = %q, %v; want the proxy's %s", out, err, version)
	}
	out, err = exec.CommandContext(ctx, exe, "-config", filepath.Join(dir, "cmd", "holdfast-lb", "testdata", "lb.json"), "check-config").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: 2 balancers, 2 groups, 3 operators") {
		t.Errorf("the installed holdfast-lb check-config: %q, %v", out, err)
	}
	// No trace of the root module in what was fetched.
	if _, err := os.Stat(filepath.Join(tmp, "modcache", "cache", "download", "github.com", "holdfast-db", "holdfast", "@v")); err == nil {
		t.Errorf("the install fetched the root module github.com/holdfast-db/holdfast")
	}
	goCmd(t, ctx, home, env, "clean", "-modcache")
}
