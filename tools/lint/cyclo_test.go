package lint

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fzipp/gocyclo"
)

// maxComplexity is the highest cyclomatic complexity a non-test function of
// fleet may have. Above it, split the function as STYLE.md says: a raw read
// and small pure functions, a decision apart from its effects.
const maxComplexity = 25

// allowed names the functions that may exceed maxComplexity, each with the
// work that brings it below. A key is a file relative to the repository's
// root and a function as gocyclo names it ("provision/loop.go
// (*Provisioner).watch"), or a file alone, which allows each of its
// functions. An entry naming a function that no longer exceeds
// maxComplexity fails the test: remove it, so the list only shrinks.
var allowed = map[string]string{}

// TestCyclomatic fails when a non-test function of the repository (every
// module, examples and tools included; testdata, vendor and hidden
// directories are not code) has a cyclomatic complexity above
// maxComplexity, as gocyclo v0.6.0 counts it: 1, plus one for each if,
// for, range, case or select clause but the default, && and ||, with a
// function literal counting toward the function it is in. The same count,
// by hand: go -C tools/lint tool gocyclo -over 25 -ignore '_test\.go$' ../..
func TestCyclomatic(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "STYLE.md")); err != nil {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
			t.Fatalf("%s is not fleet's repository: %v", root, err)
		}
	}
	stats := gocyclo.Analyze([]string{root}, regexp.MustCompile(`_test\.go$`))
	if len(stats) < 100 {
		t.Fatalf("gocyclo counted %d functions under %s; fleet has thousands", len(stats), root)
	}
	over := map[string]bool{}
	var fails []string
	for _, s := range stats {
		file, err := filepath.Rel(root, s.Pos.Filename)
		if err != nil {
			t.Fatal(err)
		}
		file = filepath.ToSlash(file)
		if s.Complexity <= maxComplexity {
			continue
		}
		key := file + " " + s.FuncName
		over[key], over[file] = true, true
		if allowed[key] == "" && allowed[file] == "" {
			fails = append(fails, fmt.Sprintf("%s:%d: %s has cyclomatic complexity %d, above %d", file, s.Pos.Line, s.FuncName, s.Complexity, maxComplexity))
		}
	}
	for key := range allowed {
		if !over[key] {
			fails = append(fails, fmt.Sprintf("allowed names %s, which is no longer above %d: remove it", key, maxComplexity))
		}
	}
	slices.Sort(fails)
	if len(fails) > 0 {
		t.Errorf("split these functions (see STYLE.md), or the list:\n%s", strings.Join(fails, "\n"))
	}
}

// TestNoCyclomaticDirectives fails when a non-test Go file of the
// repository hides a function from gocyclo with its ignore directive (the
// comment gocyclo:ignore): allowed is the one place a function is let off.
func TestNoCyclomaticDirectives(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	directive := "//gocyclo" + ":ignore"
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), directive) {
			t.Errorf("%s holds %s: name the function in allowed instead", p, directive)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
