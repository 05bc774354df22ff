package imagetest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is an OCI registry (go-containerregistry's pkg/registry, its
// blobs in memory) served over plain HTTP on 127.0.0.1 for one test. It
// counts the pulls it serves. Its methods are safe for concurrent use. It
// stops when the test ends.
type Registry struct {
	host string

	mu    sync.Mutex
	pulls map[string]int           // GETs of a manifest, by repository
	holds map[string]chan struct{} // repositories whose manifests wait, until closed
}

// StartRegistry serves a registry on a free port of 127.0.0.1 until t
// ends. Docker pulls from it without TLS: dockerd treats registries on
// 127.0.0.0/8 as insecure-allowed.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{pulls: map[string]int{}, holds: map[string]chan struct{}{}}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if held := r.count(req); held != nil {
			select {
			case <-held:
			case <-req.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Host returns the registry's address, 127.0.0.1:<port>: the registry part
// of its images' references.
func (r *Registry) Host() string { return r.host }

// Ref returns the reference of repo's image tagged tag in the registry,
// <host>/<repo>:<tag>. The image need not exist.
func (r *Registry) Ref(repo, tag string) string { return r.host + "/" + repo + ":" + tag }

// Pulls returns how many times a client fetched a manifest of repo (GET,
// by tag or digest): one for each pull that reached the registry. Pushes
// fetch none.
func (r *Registry) Pulls(repo string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pulls[repo]
}

// Hold makes every fetch of a manifest of repo (a pull of its image) wait,
// as a registry that stalls does, until release is called or the client
// gives up; the fetch is counted when it arrives. A test holds the pull of
// an action's image to stop the machine at a point of its run: the agent
// has taken the action, and it has not started. release may be called more
// than once; it is called when t ends.
func (r *Registry) Hold(t testing.TB, repo string) (release func()) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.holds[repo]; ok {
		t.Fatalf("imagetest: the pulls of %s are held already", repo)
	}
	ch := make(chan struct{})
	r.holds[repo] = ch
	var once sync.Once
	release = func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			delete(r.holds, repo)
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

// count records req when it fetches a manifest,
// GET /v2/<repo>/manifests/<ref>, and returns the channel to wait on when
// repo's manifests are held.
func (r *Registry) count(req *http.Request) <-chan struct{} {
	if req.Method != http.MethodGet {
		return nil
	}
	p, ok := strings.CutPrefix(req.URL.Path, "/v2/")
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := strings.LastIndex(p, "/manifests/"); i > 0 {
		r.pulls[p[:i]]++
		return r.holds[p[:i]]
	}
	return nil
}
