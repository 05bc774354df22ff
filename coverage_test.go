package fleet_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// citation is how docs/runbook-coverage.md names tests: a test file in
// backquotes, then the names of tests in it, separated by ", " (a name may
// carry a subtest: TestX/case).
var citation = regexp.MustCompile("`([^`]+_test\\.go)` ((?:Test|Fuzz|Benchmark|Example)\\w*(?:/[\\w-]+)?(?:, (?:Test|Fuzz|Benchmark|Example)\\w*(?:/[\\w-]+)?)*)")

// realPartsFiles are the test files whose TestIntegration tests run fleet
// on real parts end to end (docs/runbook-coverage.md, "Real parts", lists
// the same files and says what each runs).
var realPartsFiles = []string{
	"examples/internal/wholemachine/whole_linux_test.go",
	"examples/internal/firmware/firmware_linux_test.go",
	"provision/rufio_linux_test.go",
	"internal/dockertest/chain_test.go",
}

// realCount is the page's count of its items proven on real parts.
var realCount = regexp.MustCompile(`Items proven end to end on real parts: (\d+) of (\d+)\.`)

// Every test docs/runbook-coverage.md names exists in the file it names,
// and every subtest it names is one the file names, so that the page
// cannot go on citing a test that was renamed or deleted.
func TestRunbookCoverageNamesTests(t *testing.T) {
	doc := readCoverage(t)
	files := map[string]string{}
	n := 0
	for _, m := range citation.FindAllStringSubmatch(doc, -1) {
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
			fn, sub, _ := strings.Cut(name, "/")
			if !strings.Contains(src, "\nfunc "+fn+"(") {
				t.Errorf("docs/runbook-coverage.md names %s in %s, which has no such test", name, file)
			}
			if sub != "" && !strings.Contains(src, strconv.Quote(sub)) {
				t.Errorf("docs/runbook-coverage.md names %s in %s, which names no subtest %q", name, file, sub)
			}
		}
	}
	// The page cites well over a hundred tests: far fewer means the
	// pattern no longer reads it.
	if n < 100 {
		t.Errorf("read %d test names from docs/runbook-coverage.md, want at least 100", n)
	}
}

// The page's count of items proven on real parts is the count of its rows
// marked real, of all its rows of fleet's; each row marked real names a
// TestIntegration test of a real-parts file; and its list of those files
// is realPartsFiles.
func TestRunbookCoverageRealParts(t *testing.T) {
	doc := readCoverage(t)
	items, real := 0, 0
	for i, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| line |") {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
		if len(cells) != 4 {
			t.Errorf("docs/runbook-coverage.md:%d: %d cells, want 4 (line, what, tests, parts): %s", i+1, len(cells), line)
			continue
		}
		tests, parts := cells[2], cells[3]
		if strings.HasPrefix(tests, "*not fleet's*") {
			if parts != "—" {
				t.Errorf("docs/runbook-coverage.md:%d: a line that is not fleet's has parts %q, want —", i+1, parts)
			}
			continue
		}
		items++
		if !strings.HasPrefix(parts, "real: ") {
			continue
		}
		real++
		proven := false
		for _, m := range citation.FindAllStringSubmatch(tests, -1) {
			for _, name := range strings.Split(m[2], ", ") {
				if slices.Contains(realPartsFiles, m[1]) && strings.HasPrefix(name, "TestIntegration") {
					proven = true
				}
			}
		}
		if !proven {
			t.Errorf("docs/runbook-coverage.md:%d: marked real, and names no TestIntegration test of %v: %s", i+1, realPartsFiles, line)
		}
	}
	m := realCount.FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/runbook-coverage.md says no %q", realCount)
	}
	if m[1] != strconv.Itoa(real) || m[2] != strconv.Itoa(items) {
		t.Errorf("docs/runbook-coverage.md says %s of %s items are proven on real parts; its rows mark %d of %d", m[1], m[2], real, items)
	}
	if items < 60 {
		t.Errorf("read %d items from docs/runbook-coverage.md, want at least 60: the tables no longer parse", items)
	}

	_, list, ok := strings.Cut(doc, "\n## Real parts\n")
	if !ok {
		t.Fatal(`docs/runbook-coverage.md has no section "## Real parts"`)
	}
	list, _, _ = strings.Cut(list, "\n## ")
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^- `([^`]+_test\\.go)`").FindAllStringSubmatch(list, -1) {
		listed = append(listed, m[1])
	}
	if !slices.Equal(listed, realPartsFiles) {
		t.Errorf("docs/runbook-coverage.md lists the real-parts files %v, want %v", listed, realPartsFiles)
	}
}

func readCoverage(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("docs", "runbook-coverage.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// securityCitation is how SECURITY.md names the tests that show a defence
// holds: a test function's name in backquotes.
var securityCitation = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)\\w+)")

// Every test SECURITY.md names is a test function of some test file in the
// repository, so that the threat table cannot go on citing a test that was
// renamed or deleted.
func TestSecurityNamesTests(t *testing.T) {
	doc, err := os.ReadFile("SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := testFuncs(t)
	n := 0
	for _, m := range securityCitation.FindAllStringSubmatch(string(doc), -1) {
		n++
		if !defined[m[1]] {
			t.Errorf("SECURITY.md names %s, which no test file defines", m[1])
		}
	}
	// The table cites about a hundred tests: far fewer means the pattern
	// no longer reads it.
	if n < 50 {
		t.Errorf("read %d test names from SECURITY.md, want at least 50", n)
	}
}

// testFuncs returns the names of the test, fuzz and benchmark functions of
// every *_test.go file under the repository's root.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
