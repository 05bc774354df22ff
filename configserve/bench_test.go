package configserve

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/internal/testenv"
)

// benchConfigSize is about the size of a rendered Talos worker config.
const benchConfigSize = 16 << 10

type alwaysPlanned struct{}

func (alwaysPlanned) Planned(context.Context, Device) (bool, error) { return true, nil }

// benchServer starts srv (or, when srv is nil, a handler that writes
// benchConfigSize bytes with no store, gate or acknowledgement check)
// behind an HTTP(S) server on ln (nil: loopback), closed when tb ends.
func benchServer(tb testing.TB, srv *Server, tlsOn bool, ln net.Listener) *httptest.Server {
	tb.Helper()
	var h http.Handler = srv
	if srv == nil {
		body := makeConfig(benchConfigSize)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Header().Set("Connection", "close")
			w.Write(body)
		})
	}
	ts := httptest.NewUnstartedServer(h)
	if ln != nil {
		ts.Listener.Close()
		ts.Listener = ln
	}
	if srv != nil {
		if err := srv.ConfigureServer(ts.Config); err != nil {
			tb.Fatal(err)
		}
	} else {
		ts.Config.ConnContext = connContext
	}
	if tlsOn {
		// An ECDSA P-256 certificate, as ACME issues, rather than
		// httptest's RSA one.
		cert, err := testcert.New("127.0.0.1")
		if err != nil {
			tb.Fatal(err)
		}
		ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
		ts.StartTLS()
		ts.Client().Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: cert.Pool}
	} else {
		ts.Start()
	}
	tb.Cleanup(ts.Close)
	return ts
}

// benchStore starts a Server of cfg whose gate says every device is
// planned, remembering b.N+1 spent codes, behind benchServer, and holds
// b.N configs of benchConfigSize under fresh codes.
func benchStore(b *testing.B, cfg *Config, tlsOn bool) (*Server, *httptest.Server, []string) {
	b.Helper()
	cfg.SpentCodes = b.N + 1
	srv, err := New(alwaysPlanned{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	ts := benchServer(b, srv, tlsOn, nil)
	codes := make([]string, b.N)
	for i := range codes {
		codes[i], _ = putNew(b, srv, benchConfigSize, Device{ID: int64(i + 1)}, "provision-bench-"+strconv.Itoa(i))
	}
	return srv, ts, codes
}

func fetchOnce(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || n != benchConfigSize {
		return fmt.Errorf("status %d with %d bytes", resp.StatusCode, n)
	}
	return nil
}

// BenchmarkServe measures single-use serves per second over loopback:
// parallel clients, each code fetched once, each answer acknowledged
// before it counts. An answer that carries a config closes its connection,
// so every serve opens a connection (and, over TLS, makes a full
// handshake), as a node's fetch does. The clients run in the same process,
// on the same cores. "plain-handler" is the floor: the same clients and
// connections against a handler that only writes the same bytes with
// Connection: close, with no store, gate or acknowledgement check.
func BenchmarkServe(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name+"/configserve", func(b *testing.B) {
			var served atomic.Int64
			srv, ts, codes := benchStore(b, &Config{Events: func(ev Event) {
				if ev.Kind == Served {
					served.Add(1)
				}
			}}, tr.tls)
			runServes(b, ts, func(i int) string { return ts.URL + PathPrefix + codes[i] })
			// The last Served events may trail the answers a little.
			testenv.WaitFor(b, 5*time.Second, "served event per serve", func() bool { return served.Load() >= int64(b.N) })
			if got := served.Load(); got != int64(b.N) || srv.Waiting() != 0 {
				b.Fatalf("%d served, %d waiting, want %d served", got, srv.Waiting(), b.N)
			}
		})
		b.Run(tr.name+"/plain-handler", func(b *testing.B) {
			ts := benchServer(b, nil, tr.tls, nil)
			runServes(b, ts, func(int) string { return ts.URL + "/x" })
		})
	}
}

// runServes fetches url(i) for every i in [0, b.N) from 16 parallel
// clients and reports serves per second, and the process's CPU time per
// serve with what it would give on two cores of its own.
func runServes(b *testing.B, ts *httptest.Server, url func(int) string) {
	b.SetParallelism(8)
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 8 * runtime.GOMAXPROCS(0)
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			if err := fetchOnce(c, url(int(i))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "serves/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/serve")
	b.ReportMetric(2*float64(b.N)/cpu.Seconds(), "serves/2-cpu-s")
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFetchLatency compares one fetch at a time over a keep-alive
// connection: through the Server (store, gate, acknowledgement check)
// against a handler that only writes the same number of bytes.
func BenchmarkFetchLatency(b *testing.B) {
	b.Run("configserve", func(b *testing.B) {
		_, ts, codes := benchStore(b, &Config{}, false)
		c := ts.Client()
		b.ResetTimer()
		for i := range b.N {
			if err := fetchOnce(c, ts.URL+PathPrefix+codes[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-handler", func(b *testing.B) {
		ts := benchServer(b, nil, false, nil)
		c := ts.Client()
		for b.Loop() {
			if err := fetchOnce(c, ts.URL+PathPrefix+"x"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAckCheck measures the acknowledgement check alone on a loopback
// TCP connection whose peer reads all the time: write an answer-sized
// block, then wait for its acknowledgement. "write" is the write alone,
// "roundtrip" a one-byte echo, the round trip the check is compared with.
func BenchmarkAckCheck(b *testing.B) {
	block := make([]byte, benchConfigSize)
	b.Run("write", func(b *testing.B) {
		server, client := tcpPair(b, 0)
		go io.Copy(io.Discard, client)
		for b.Loop() {
			if _, err := server.Write(block); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write+ack", func(b *testing.B) {
		server, client := tcpPair(b, 0)
		go io.Copy(io.Discard, client)
		sock, err := tcpSocket(server)
		if err != nil {
			b.Fatal(err)
		}
		polls := 0
		var wait time.Duration
		for b.Loop() {
			if _, err := server.Write(block); err != nil {
				b.Fatal(err)
			}
			res, err := awaitAck(sock, time.Now().Add(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			polls += res.polls
			wait += res.wait
		}
		b.ReportMetric(float64(polls)/float64(b.N), "polls/op")
		b.ReportMetric(float64(wait.Nanoseconds())/float64(b.N), "ack-ns/op")
	})
	b.Run("roundtrip", func(b *testing.B) {
		server, client := tcpPair(b, 0)
		go io.Copy(client, client)
		one := make([]byte, 1)
		for b.Loop() {
			if _, err := server.Write(one); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(server, one); err != nil {
				b.Fatal(err)
			}
		}
	})
}
