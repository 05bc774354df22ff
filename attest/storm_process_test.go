package attest_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
)

// stormServerEnv makes the test binary the storm's fleetd process instead
// of running tests (TestMain).
const stormServerEnv = "FLEET_ATTEST_STORM_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stormServerEnv) == "1" {
		if err := stormProcess(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type stormReady struct {
	Addr string
	Cert []byte
}

type stormDone struct {
	Admitted     int64
	BindingCalls int
	CPU          time.Duration // the process's CPU from ready to done
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stormProcess is fleetd alone in its process: it reads the bindings (one
// JSON object) from in, serves the attestation server over HTTPS on
// loopback, says where on out, and when in closes reports its CPU.
func stormProcess(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(in)
	var bindings map[string]attest.Binding
	if err := dec.Decode(&bindings); err != nil {
		return err
	}
	src := &attesttest.Bindings{}
	for s, b := range bindings {
		src.Set(s, b)
	}
	var admitted atomic.Int64
	srv, err := stormServer(src, func(string) error {
		admitted.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	cfg, _, err := stormTLS()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, TLSConfig: cfg}
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()
	start := cpuTime()
	enc := json.NewEncoder(out)
	if err := enc.Encode(stormReady{Addr: ln.Addr().String(), Cert: cfg.Certificates[0].Certificate[0]}); err != nil {
		return err
	}
	io.Copy(io.Discard, in) // until the storm is over
	return enc.Encode(stormDone{Admitted: admitted.Load(), BindingCalls: src.Calls(), CPU: cpuTime() - start})
}

// BenchmarkBootStormProcess is the boot storm with fleetd in a process of
// its own, so that its CPU per attestation (TLS, HTTP, the protocol, GC) is
// measured apart from the machines'. The machines still share the cores.
func BenchmarkBootStormProcess(b *testing.B) {
	const n = 1000
	bindings := &attesttest.Bindings{}
	machines := stormMachines(b, bindings, n)
	table := map[string]attest.Binding{}
	for _, m := range machines {
		if bd, err := bindings.Binding(context.Background(), m.serial); err == nil && bd.Found {
			table[m.serial] = bd
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), stormServerEnv+"=1")
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		json.NewEncoder(stdin).Encode(table)
		rd := json.NewDecoder(bufio.NewReader(stdout))
		var ready stormReady
		if err := rd.Decode(&ready); err != nil {
			b.Fatal(err)
		}
		cert, err := x509.ParseCertificate(ready.Cert)
		if err != nil {
			b.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(cert)

		r := stormRun(b, machines, "https://"+ready.Addr+"/attest", pool)
		stdin.Close()
		var done stormDone
		if err := rd.Decode(&done); err != nil {
			b.Fatal(err)
		}
		cmd.Wait()
		want := 0
		for _, m := range machines {
			if m.want == attest.Attested {
				want++
			}
		}
		if done.Admitted != int64(want) || done.BindingCalls != n {
			b.Fatalf("fleetd admitted %d (want %d) and asked for %d bindings (want %d)", done.Admitted, want, done.BindingCalls, n)
		}
		b.ReportMetric(float64(n)/r.wall.Seconds(), "attestations/s")
		b.ReportMetric(float64(r.p50.Milliseconds()), "p50-ms")
		b.ReportMetric(float64(r.p99.Milliseconds()), "p99-ms")
		b.ReportMetric(float64(done.CPU.Microseconds())/n, "fleetd-cpu-µs/attestation")
		b.ReportMetric(2*float64(time.Second)/(float64(done.CPU)/n), "fleetd-capacity-attestations/s-on-2-cores")
	}
}
