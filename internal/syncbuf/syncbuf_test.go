package syncbuf

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}

func TestLines(t *testing.T) {
	var b Buffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	log.Info("attest.verdict", "serial", "S1")
	log.Info("attest.verdicts", "serial", "S2")
	log.Info("attest.verdict")
	got := b.Lines("attest.verdict")
	if len(got) != 2 || !strings.Contains(got[0], "serial=S1") || !strings.HasSuffix(got[1], "msg=attest.verdict") {
		t.Fatalf("Lines = %q", got)
	}
	if slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, "S2") }) {
		t.Error("Lines matched a longer message")
	}
}
