package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makeTargets returns the targets the repository's Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z-]*):`).FindAllStringSubmatch(string(data), -1) {
		targets[m[1]] = true
	}
	return targets
}

// bullet returns the README's list item that starts with prefix (up to
// the next item or blank line), or "".
func bullet(readme, prefix string) string {
	i := strings.Index(readme, "\n- "+prefix)
	if i < 0 {
		return ""
	}
	item := readme[i+3:]
	if j := strings.Index(item, "\n- "); j >= 0 {
		item = item[:j]
	}
	if j := strings.Index(item, "\n\n"); j >= 0 {
		item = item[:j]
	}
	return strings.Join(strings.Fields(item), " ") // one line: prose wraps anywhere
}

// TestReadmeCommands fails when the README names a make target the
// Makefile lacks, or stops saying what its commands cost: how long make
// test takes and what it downloads, and how long make test-short takes (a
// newcomer runs them on the first day and should know before).
func TestReadmeCommands(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	targets := makeTargets(t)
	// make X as a command: in a code span, or a line of a code block.
	for _, m := range regexp.MustCompile("(?m)(?:`|^)make ([a-z][a-z-]*)").FindAllStringSubmatch(readme, -1) {
		if !targets[m[1]] {
			t.Errorf("the README names make %s, which the Makefile does not define", m[1])
		}
	}
	for _, target := range []string{"test", "test-short"} {
		if !strings.Contains(readme, "make "+target+" ") {
			t.Errorf("the README does not give make %s", target)
		}
		if !targets[target] {
			t.Errorf("the Makefile has no target %s", target)
		}
	}
	duration := regexp.MustCompile(`\b\d+ (s|min|minutes)\b`)
	cost := bullet(readme, "**What `make test` costs**")
	switch {
	case cost == "":
		t.Errorf("the README has no item \"**What `make test` costs**\"")
	case !duration.MatchString(cost):
		t.Errorf("the README's cost of make test gives no duration:\n%s", cost)
	case !regexp.MustCompile(`\b\d+ modules\b`).MatchString(cost) || !strings.Contains(cost, "module proxy"):
		t.Errorf("the README's cost of make test does not say what it downloads (N modules, from the module proxy):\n%s", cost)
	}
	short := bullet(readme, "**`make test-short`**")
	switch {
	case short == "":
		t.Errorf("the README has no item \"**`make test-short`**\"")
	case !duration.MatchString(short):
		t.Errorf("the README's make test-short gives no measured duration:\n%s", short)
	}
}
