package attest_test

import (
	"bytes"
	"crypto"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// setupSWTPM manufactures a swtpm state with EK certificates and the
// SHA-256 PCR bank alone active, and returns the swtpm command and the state's
// directory.
func setupSWTPM(t *testing.T) (swtpm, state string) {
	t.Helper()
	testenv.Short(t)
	return testenv.ManufactureTPM(t, t.TempDir())
}

// startSWTPM starts swtpm on a free pair of loopback ports, dials its
// command port, and stops the one process it started when t ends.
func startSWTPM(t *testing.T, swtpm, state string) net.Conn {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		port := freePortPair(t)
		var stderr bytes.Buffer
		cmd := exec.Command(swtpm, "socket", "--tpm2",
			"--tpmstate", "dir="+state,
			"--server", "type=tcp,port="+strconv.Itoa(port)+",bindaddr=127.0.0.1",
			"--ctrl", "type=tcp,port="+strconv.Itoa(port+1)+",bindaddr=127.0.0.1",
			"--flags", "not-need-init,startup-clear")
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case err := <-exited:
				t.Logf("swtpm on port %d exited: %v: %s", port, err, stderr.String())
				exited <- err
				goto next
			default:
			}
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
			if err == nil {
				t.Cleanup(stop)
				return conn
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		t.Fatalf("swtpm did not listen on port %d: %s", port, stderr.String())
	next:
	}
	t.Fatal("swtpm did not start in 5 attempts")
	return nil
}

// freePortPair returns a port P such that P and P+1 were free on loopback.
func freePortPair(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no free pair of ports")
	return 0
}

// TestIntegrationSWTPMQuote quotes swtpm's PCRs after a synthetic boot
// extended into them, with Secure Boot on and off, and refuses quotes
// that do not verify (testQuote): with the PCR banks swtpm_setup
// activates by default (SHA-256 alone), then manufactured with SHA-1 and
// SHA-256, and with the four banks (as OVMF allocates them). Each case
// starts swtpm anew on one manufactured state: startup-clear resets its
// PCRs.
func TestIntegrationSWTPMQuote(t *testing.T) {
	for _, banks := range bankSets {
		t.Run(bankList(banks), func(t *testing.T) {
			testenv.Short(t)
			swtpm, state := testenv.ManufactureTPMBanks(t, t.TempDir(), strings.ReplaceAll(bankList(banks), "+", ","))
			testQuote(t, banks, func(t *testing.T, boot *attesttest.BootLog) quoter {
				conn := startSWTPM(t, swtpm, state)
				if err := boot.ExtendInto(attesttest.Channel(conn)); err != nil {
					t.Fatal(err)
				}
				dev := attest.OpenChannel(conn)
				t.Cleanup(func() { dev.Close() })
				return dev
			})
		})
	}
}

// swtpm_setup activates the SHA-256 bank alone unless told otherwise: a
// log of the four banks, as OVMF would write had it not reallocated the
// banks, does not extend into it, and one of SHA-256 alone does.
func TestIntegrationSWTPMDefaultBanks(t *testing.T) {
	swtpm, state := setupSWTPM(t)
	conn := startSWTPM(t, swtpm, state)
	four := attesttest.NewBootLog()
	four.Add(0, attesttest.EvSeparator, []byte{0, 0, 0, 0})
	err := four.ExtendInto(attesttest.Channel(conn))
	if want := "attesttest: the TPM's active PCR banks (sha256) are not the log's (sha1, sha256, sha384, sha512)"; err == nil || err.Error() != want {
		t.Fatalf("ExtendInto a four-bank log: %v, want %q", err, want)
	}
	one := attesttest.NewBootLog(crypto.SHA256)
	one.Add(0, attesttest.EvSeparator, []byte{0, 0, 0, 0})
	if err := one.ExtendInto(attesttest.Channel(conn)); err != nil {
		t.Fatal(err)
	}
}
