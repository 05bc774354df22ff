package fleet_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citation is how docs/runbook-coverage.md names tests: a test file in
// backquotes, then the names of tests in it, separated by ", " (a name may
// carry a subtest: TestX/case).
var citation = regexp.MustCompile("`([^`]+_test\\.go)` ((?:Test|Fuzz|Benchmark|Example)\\w*(?:/\\S+)?(?:, (?:Test|Fuzz|Benchmark|Example)\\w*(?:/\\S+)?)*)")

// Every test docs/runbook-coverage.md names exists in the file it names,
// so that the page cannot go on citing a test that was renamed or
// deleted.
func TestRunbookCoverageNamesTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "runbook-coverage.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	n := 0
	for _, m := range citation.FindAllStringSubmatch(string(doc), -1) {
		file := m[1]
		src, ok := files[file]
		if !ok {
			b, err := os.ReadFile(filepath.FromSlash(file))
			if err != nil {
				t.Errorf("docs/runbook-coverage.md names %s: %v", file, err)
			}
			src = string(b)
			files[file] = src
		}
		for _, name := range strings.Split(m[2], ", ") {
			n++
			fn, _, _ := strings.Cut(name, "/")
			if !strings.Contains(src, "\nfunc "+fn+"(") {
				t.Errorf("docs/runbook-coverage.md names %s in %s, which has no such test", name, file)
			}
		}
	}
	// The page cites well over a hundred tests: far fewer means the
	// pattern no longer reads it.
	if n < 100 {
		t.Errorf("read %d test names from docs/runbook-coverage.md, want at least 100", n)
	}
}
