package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ManufactureTPM makes the state of a software TPM in dir, as a maker
// would ship it: swtpm_setup with EK certificates (RSA-2048 and ECC P-256)
// signed by a local CA of the test's own (not the machine's), a platform
// certificate, and a SHA-256 PCR bank. It returns the swtpm program and the
// state's directory, for `swtpm socket --tpmstate dir=<state>`. It ends t,
// as Short and Command do, under -short or when swtpm or its tools are
// missing.
func ManufactureTPM(t testing.TB, dir string) (swtpm, state string) {
	t.Helper()
	return ManufactureTPMBanks(t, dir, "sha256")
}

// ManufactureTPMBanks is ManufactureTPM with the PCR banks active, as
// swtpm_setup's --pcr-banks names them: "sha1,sha256" for the pair the TCG
// PC Client profile requires of a PC's TPM.
func ManufactureTPMBanks(t testing.TB, dir, banks string) (swtpm, state string) {
	t.Helper()
	Short(t)
	swtpm = Command(t, "swtpm", "swtpm")
	setup := Command(t, "swtpm_setup", "swtpm-tools")
	localCA := Command(t, "swtpm_localca", "swtpm-tools")

	state, ca := filepath.Join(dir, "state"), filepath.Join(dir, "ca")
	for _, d := range []string{state, ca} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	localca := write("swtpm-localca.conf", fmt.Sprintf("statedir = %s\nsigningkey = %s/signkey.pem\nissuercert = %s/issuercert.pem\ncertserial = %s/certserial\n", ca, ca, ca, ca))
	options := write("swtpm-localca.options", "--platform-manufacturer fleet\n--platform-version 2.1\n--platform-model test\n")
	conf := write("swtpm_setup.conf", fmt.Sprintf("create_certs_tool = %s\ncreate_certs_tool_config = %s\ncreate_certs_tool_options = %s\nactive_pcr_banks = %s\n",
		localCA, localca, options, banks))
	out, err := exec.Command(setup, "--tpm2", "--tpmstate", state, "--config", conf,
		"--create-ek-cert", "--create-platform-cert", "--lock-nvram", "--overwrite").CombinedOutput()
	if err != nil {
		t.Fatalf("swtpm_setup: %v\n%s", err, out)
	}
	return swtpm, state
}
