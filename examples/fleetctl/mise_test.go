package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// miseTasks reads the tasks of the repository's mise.toml: each
// [tasks.NAME] table's run command. It knows only the forms the file uses,
// and fails on any other line, so that a task it cannot read is not passed
// over.
func miseTasks(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tasks := map[string]string{}
	task := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[tasks.") && strings.HasSuffix(line, "]"):
			task = strings.TrimSuffix(strings.TrimPrefix(line, "[tasks."), "]")
			if q, err := strconv.Unquote(task); err == nil {
				task = q
			}
			tasks[task] = ""
		case task != "" && (strings.HasPrefix(line, "run = ") || strings.HasPrefix(line, "description = ")):
			key, value, _ := strings.Cut(line, " = ")
			v, err := strconv.Unquote(value)
			if err != nil {
				t.Fatalf("%s:%d: %s is not a quoted string: %v", path, n, key, err)
			}
			if key == "run" {
				tasks[task] = v
			}
		default:
			t.Fatalf("%s:%d: a line this test cannot read: %q", path, n, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tasks
}

// The runbook's `mise run attest:approve <serial>` and `mise run
// render-class-inputs` name fleetctl commands that exist.
func TestMiseTasks(t *testing.T) {
	tasks := miseTasks(t, "../../mise.toml")
	for task, cmd := range map[string]string{"attest:approve": "approve", "render-class-inputs": "render-class-inputs"} {
		line, ok := tasks[task]
		if !ok {
			t.Errorf("mise.toml has no task %q", task)
			continue
		}
		words := strings.Fields(line)
		if len(words) != 4 || words[0] != "go" || words[1] != "run" || words[2] != "./examples/fleetctl" || words[3] != cmd {
			t.Errorf("task %q runs %q, want go run ./examples/fleetctl %s", task, line, cmd)
			continue
		}
		if _, _, stderr := fleetctl(cmd, "-h"); !strings.HasPrefix(stderr, "usage: fleetctl "+cmd) {
			t.Errorf("task %q: fleetctl %s -h printed %q, want its usage", task, cmd, stderr)
		}
	}
	if len(tasks) != 2 {
		t.Errorf("mise.toml has the tasks %v, want the runbook's two", tasks)
	}
}
