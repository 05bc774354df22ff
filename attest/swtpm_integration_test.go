//go:build linux

package attest_test

import (
	"crypto"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// startSWTPM starts swtpm on a unix socket of t's, dials it, and stops
// the one process it started when t ends.
func startSWTPM(t *testing.T, swtpm, state string) net.Conn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "swtpm.sock")
	testenv.ServeTPM(t, swtpm, state, sock)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return conn
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
	swtpm, state := testenv.ManufactureTPM(t, t.TempDir())
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
