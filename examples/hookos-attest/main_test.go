package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/lldpwait"
)

const (
	testBootID = "3b8e5f1c-2d4a-4e6b-9c7d-0a1b2c3d4e5f"
	testSerial = "CZ2D1K0ABC"
	testMAC    = "3c:ec:ef:12:34:56"
	testCode   = "ic-W3s6mB0qLx9TzR4vN1yK"
)

// softTPM is one software TPM for every test: making one costs an RSA key.
var softTPM = sync.OnceValue(func() *attesttest.SoftTPM {
	s, err := attesttest.NewSoftTPM(nil)
	if err != nil {
		panic(err)
	}
	return s
})

// closer makes a SoftTPM a tpmDevice and remembers whether it was closed.
type closer struct {
	*attesttest.SoftTPM
	closed bool
}

func (c *closer) Close() error { c.closed = true; return nil }

// hookOS is a fake HookOS root file system: the boot ID, a kernel command
// line naming the boot MAC, a default route, two Ethernet interfaces and
// loopback, and SMBIOS.
func hookOS() fstest.MapFS {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), Mode: 0o444} }
	return fstest.MapFS{
		"proc/sys/kernel/random/boot_id": file(testBootID + "\n"),
		"proc/cmdline":                   file("console=ttyS0 facility=onprem syslog_host=10.0.0.2 grpc_authority=10.0.0.2:42113 tinkerbell_tls=false worker_id=" + testMAC + " hw_addr=" + testMAC + " modules=loop,squashfs\n"),
		"proc/net/route": file("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
			"eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"),
		"sys/class/net/lo/address":           file("00:00:00:00:00:00\n"),
		"sys/class/net/lo/flags":             file("0x9\n"),
		"sys/class/net/lo/type":              file("772\n"),
		"sys/class/net/eth0/address":         file(testMAC + "\n"),
		"sys/class/net/eth0/flags":           file("0x1003\n"),
		"sys/class/net/eth0/type":            file("1\n"),
		"sys/class/net/eth1/address":         file("3c:ec:ef:12:34:57\n"),
		"sys/class/net/eth1/flags":           file("0x1002\n"),
		"sys/class/net/eth1/type":            file("1\n"),
		"sys/class/dmi/id/product_serial":    file(testSerial + "\n"),
		"sys/class/dmi/id/sys_vendor":        file("Supermicro\n"),
		"sys/class/dmi/id/product_name":      file("SYS-E300-9D\n"),
		"sys/class/dmi/id/chassis_serial":    file("C3000AB12345\n"),
		"sys/class/dmi/id/board_serial":      file("OM18AS012345\n"),
		"sys/class/dmi/id/product_uuid":      file("00000000-0000-0000-0000-3cecef123456\n"),
		"sys/class/dmi/id/product_version":   file("0123456789\n"),
		"sys/class/dmi/id/chassis_asset_tag": file("Default string\n"),
	}
}

// fleetd is an attest.Server on httptest's TLS, with the CA file that
// trusts it.
type fleetd struct {
	srv      *attest.Server
	url      string
	caFile   string
	bindings *attesttest.Bindings
	claims   chan attest.Claim
	admit    attest.Admission
}

func newFleetd(t *testing.T) *fleetd {
	t.Helper()
	f := &fleetd{bindings: &attesttest.Bindings{}, claims: make(chan attest.Claim, 1), admit: attest.Admission{InstallCode: testCode}}
	srv, err := attest.NewServer(f.bindings, &attest.Config{
		Admit: func(_ context.Context, c attest.Claim) (attest.Admission, error) {
			f.claims <- c
			return f.admit, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	mux := http.NewServeMux()
	mux.Handle("/attest/", srv)
	hs := httptest.NewTLSServer(mux)
	t.Cleanup(hs.Close)
	f.url = hs.URL + "/attest"
	f.caFile = filepath.Join(t.TempDir(), "fleetd-ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	if err := os.WriteFile(f.caFile, pemData, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// approve makes fleetd's binding of the test serial tpm's (softTPM():
// the agent's).
func (f *fleetd) approve(t *testing.T, tpm *attesttest.SoftTPM) *fleetd {
	t.Helper()
	f.bindings.Set(testSerial, attesttest.Approved(t, tpm))
	return f
}

// agent is one run of the agent on a fake HookOS.
type agent struct {
	env     map[string]string
	m       machine
	tpm     *closer
	lldp    *lldpwait.Neighbor // nil: no frame within the wait
	lldpErr error              // set: listening fails
	waited  string             // the interface waited on
	wait    time.Duration
	bootDir string
}

func newAgent(t *testing.T, f *fleetd) *agent {
	t.Helper()
	a := &agent{
		tpm:     &closer{SoftTPM: softTPM()},
		bootDir: filepath.Join(t.TempDir(), "fleet"),
		lldp: &lldpwait.Neighbor{
			ChassisIDSubtype: lldpwait.ChassisMACAddress, ChassisID: "74:83:c2:01:02:03",
			PortIDSubtype: lldpwait.PortLocal, PortID: "Port 5", SystemName: "usw-pro-24",
		},
	}
	a.env = map[string]string{"FLEETD_URL": f.url, "FLEETD_CA": f.caFile, "FLEET_BOOT_DIR": a.bootDir}
	a.m = machine{
		root:    hookOS(),
		openTPM: func(path string) (tpmDevice, error) { return a.tpm, nil },
		waitLLDP: func(ctx context.Context, ifname string, cfg *lldpwait.Config) (*lldpwait.Neighbor, error) {
			a.waited, a.wait = ifname, cfg.Wait
			if a.lldpErr != nil {
				return nil, a.lldpErr
			}
			if a.lldp == nil {
				return nil, fmt.Errorf("lldpwait: no LLDP frame on %s within %v: %w", ifname, cfg.Wait, lldpwait.ErrTimeout)
			}
			return a.lldp, nil
		},
		backoff: func(int) time.Duration { return 0 },
		now:     func() time.Time { return time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC) },
	}
	return a
}

func (a *agent) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, func(k string) string { return a.env[k] }, a.m, &out, &errb)
	if strings.Contains(out.String()+errb.String(), testCode) {
		t.Errorf("the output shows the install code:\n%s%s", out.String(), errb.String())
	}
	return code, out.String(), errb.String()
}

// runExits is run that fails t at once unless the agent exits code.
func (a *agent) runExits(t *testing.T, code int, args ...string) (stdout, stderr string) {
	t.Helper()
	got, stdout, stderr := a.run(t, args...)
	if got != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got, code, stdout, stderr)
	}
	return stdout, stderr
}

func (a *agent) record(t *testing.T) disksafe.BootRecord {
	t.Helper()
	r, err := disksafe.ReadBootRecord(a.bootDir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantRecord fails t unless the boot record is this boot's, attested or
// not, and holds no install code.
func (a *agent) wantRecord(t *testing.T, attested bool) {
	t.Helper()
	if r := a.record(t); r.Attested != attested || r.Code != "" || r.BootID != testBootID {
		t.Errorf("record = %v, want this boot's, attested %t, with no code", r, attested)
	}
}

func TestPassedWithCode(t *testing.T) {
	f := newFleetd(t).approve(t, softTPM())
	a := newAgent(t, f)
	stdout, stderr := a.runExits(t, exitAttested)
	want := "lldp: eth0 is on switch port Port 5 of usw-pro-24\nattest: PASSED\ninstall code written\n"
	if stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if stderr != "" {
		t.Errorf("stderr = %q", stderr)
	}
	got := a.record(t)
	if got.BootID != testBootID || !got.Attested || got.Code != testCode || !got.Time.Equal(a.m.now()) {
		t.Errorf("record = %v (code written: %t)", got, got.Code == testCode)
	}
	if fi, err := os.Stat(filepath.Join(a.bootDir, disksafe.BootRecordFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("record file: %v, %v", fi.Mode(), err)
	}
	c := <-f.claims
	if c.Serial != testSerial || c.MAC.String() != testMAC {
		t.Errorf("claim of %s %s", c.Serial, c.MAC)
	}
	if c.LLDP == nil || c.LLDP.PortID != "Port 5" || c.LLDP.ChassisID != "74:83:c2:01:02:03" || c.LLDP.SystemName != "usw-pro-24" ||
		c.LLDP.PortIDSubtype != uint8(lldpwait.PortLocal) || c.LLDP.ChassisIDSubtype != uint8(lldpwait.ChassisMACAddress) {
		t.Errorf("claimed port %+v", c.LLDP)
	}
	if n, err := lldpwait.Port(&lldpwait.Neighbor{
		ChassisIDSubtype: lldpwait.ChassisIDSubtype(c.LLDP.ChassisIDSubtype), ChassisID: c.LLDP.ChassisID,
		PortIDSubtype: lldpwait.PortIDSubtype(c.LLDP.PortIDSubtype), PortID: c.LLDP.PortID,
	}, nil); err != nil || n != 5 {
		t.Errorf("fleetd names the claimed port %d, %v; want 5", n, err)
	}
	if a.waited != "eth0" || a.wait != defaultLLDPWait {
		t.Errorf("waited on %q for %v", a.waited, a.wait)
	}
	if !a.tpm.closed {
		t.Error("the TPM was not closed")
	}
}

// Every outcome but a pass with a code (TestPassedWithCode): the exit
// code, what stdout and stderr say, and a boot record of this boot that
// holds no pass unless fleetd attested the machine, whatever pass was
// recorded before. The runbook: "The console says attest: FAILED and the
// agent starts at once" when fleetd refused the machine, with a verdict or
// without one (two NetBox devices hold the serial: the agent says why and
// tries no more); "attest: try 5 failed" when no verdict came. With no
// switch port known the agent attests all the same; a local failure ends
// the agent before it attests, with this boot recorded as not attested
// once it has a boot ID and a place for the record.
func TestOutcomes(t *testing.T) {
	refusal := fmt.Sprintf("NetBox holds more than one device with serial %q", testSerial)
	const previousBoot = "00000000-1111-2222-3333-444444444444"
	local := []string{"attest: "}
	noCode := attest.Admission{NoProvision: "a control plane waits for desired_action=provision"}
	for _, tc := range []struct {
		name      string
		noEntry   bool // no entry names the serial; otherwise the software TPM's approves it
		setup     func(t *testing.T, f *fleetd, a *agent)
		args      []string
		earlier   string // the boot ID of a pass with a code recorded before the run; "": none
		code      int
		has       []string // stdout holds each
		prefix    string   // stdout begins so
		suffix    string   // stdout ends so
		not       []string // stdout holds none
		stderr    string   // stderr begins so
		attested  bool
		unwritten bool // no boot record is written
		quick     bool // five tries with no back-off take under 10 s
		check     func(t *testing.T, f *fleetd, a *agent)
	}{
		{name: "passed-without-code", setup: func(t *testing.T, f *fleetd, a *agent) {
			f.admit = noCode
		}, code: exitAttested, suffix: "attest: PASSED\nattest: no provision: a control plane waits for desired_action=provision\n",
			not: []string{"install code written"}, attested: true},
		{name: "pending-approval", noEntry: true, setup: func(t *testing.T, f *fleetd, a *agent) {
			a.lldp = nil // and no frame came
		}, earlier: testBootID, code: exitRefused,
			has: []string{"lldp: no LLDP frame on eth0 within 35s; attesting with no switch port\nattest: FAILED pending-approval\nattest: "},
			not: []string{"install code written"},
			check: func(t *testing.T, f *fleetd, a *agent) {
				ws := f.srv.Waiting(testSerial)
				if len(ws) != 1 {
					t.Fatalf("%d claims wait, want 1", len(ws))
				}
				if w := ws[0]; w.LLDP != nil {
					t.Errorf("the claim has a port without an LLDP frame: %+v", w.LLDP)
				}
			}},
		{name: "refused-claim", setup: func(t *testing.T, f *fleetd, a *agent) {
			f.bindings.SetError(&attest.BindingError{Reason: refusal, Err: errors.New("netbox: devices w-01 (id 3) and w-02 (id 7) both have serial")})
		}, earlier: testBootID, code: exitRefused, suffix: "\nattest: FAILED\nattest: " + refusal + "\n", not: []string{"try", "w-01"}},
		{name: "swapped-tpm", setup: func(t *testing.T, f *fleetd, a *agent) {
			f.approve(t, attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{NoECC: true}))
		}, earlier: testBootID, code: exitRefused, has: []string{"attest: FAILED ek-hash-mismatch\n"}},
		{name: "fleetd-down", setup: func(t *testing.T, f *fleetd, a *agent) {
			// A port nothing listens on.
			l := httptest.NewUnstartedServer(nil)
			a.env["FLEETD_URL"] = "https://" + l.Listener.Addr().String() + "/attest"
			l.Close()
		}, earlier: previousBoot, code: exitNoVerdict,
			has: []string{"attest: try 1 failed\n", "attest: try 2 failed\n", "attest: try 3 failed\n", "attest: try 4 failed\n", "attest: try 5 failed\n"},
			not: []string{"attest: try 6 failed", "PASSED", "FAILED "}, stderr: "hookos-attest: attest: no verdict", quick: true},
		{name: "wrong-ca", setup: func(t *testing.T, f *fleetd, a *agent) {
			// A CA that signed nothing fleetd holds.
			other, err := testcert.New("another CA")
			if err != nil {
				t.Fatal(err)
			}
			if a.env["FLEETD_CA"], _, err = other.WriteFiles(t.TempDir()); err != nil {
				t.Fatal(err)
			}
		}, earlier: testBootID, code: exitNoVerdict, has: []string{"attest: try 5 failed\n", "certificate"}},

		// No switch port: the agent attests all the same.
		{name: "listening-fails", setup: func(t *testing.T, f *fleetd, a *agent) {
			f.admit = noCode
			a.lldpErr = fmt.Errorf("lldpwait: listening for LLDP frames on eth0 is not implemented on darwin: %w", errors.ErrUnsupported)
		}, code: exitAttested, prefix: "lldp: lldpwait: listening for LLDP frames on eth0 is not implemented on darwin: unsupported operation; attesting with no switch port\n",
			attested: true, check: admittedWithoutPort("eth0")},
		{name: "lldp-wait-0-does-not-listen", setup: func(t *testing.T, f *fleetd, a *agent) { f.admit = noCode }, args: []string{"-lldp-wait", "0"}, code: exitAttested,
			prefix: "lldp: not listening on eth0 (-lldp-wait 0); attesting with no switch port\n", attested: true, check: admittedWithoutPort("")},
		{name: "an-overlong-port-id", setup: func(t *testing.T, f *fleetd, a *agent) {
			f.admit = noCode
			a.lldp.PortID = strings.Repeat("ab:", 200)
			a.lldp.SystemName = strings.Repeat("s", 300)
		}, code: exitAttested, prefix: "lldp: the switch's frame names its port in more than 255 bytes; attesting with no switch port\n",
			attested: true, check: admittedWithoutPort("eth0")},

		// Local failures: the agent does not attest.
		{name: "no-tpm", setup: func(t *testing.T, f *fleetd, a *agent) {
			a.m.openTPM = func(string) (tpmDevice, error) {
				return nil, fmt.Errorf("%w: open /dev/tpmrm0: no such file or directory", attest.ErrTPM)
			}
		}, code: exitLocal, not: local, stderr: "hookos-attest: attest: the TPM failed: open /dev/tpmrm0: no such file or directory\n", check: notAdmitted},
		{name: "placeholder-serial", setup: func(t *testing.T, f *fleetd, a *agent) {
			a.m.root.(fstest.MapFS)["sys/class/dmi/id/product_serial"] = &fstest.MapFile{Data: []byte("To Be Filled By O.E.M.\n")}
		}, code: exitLocal, not: local, stderr: `hookos-attest: attest: SMBIOS reports no serial: product_serial is the placeholder "To Be Filled By O.E.M."` + "\n", check: notAdmitted},
		{name: "no-boot-id", setup: func(t *testing.T, f *fleetd, a *agent) {
			delete(a.m.root.(fstest.MapFS), "proc/sys/kernel/random/boot_id")
		}, code: exitLocal, not: local, stderr: "hookos-attest: ", unwritten: true, check: notAdmitted},
		{name: "no-such-interface", setup: func(t *testing.T, f *fleetd, a *agent) { a.env["FLEET_INTERFACE"] = "eth9" },
			code: exitLocal, not: local, stderr: "hookos-attest: no interface eth9\n", check: notAdmitted},
		{name: "an-interface-without-a-mac", setup: func(t *testing.T, f *fleetd, a *agent) { a.env["FLEET_INTERFACE"] = "lo" },
			code: exitLocal, not: local, stderr: `hookos-attest: lo has no Ethernet MAC ("00:00:00:00:00:00")` + "\n", check: notAdmitted},
		{name: "no-boot-interface", setup: func(t *testing.T, f *fleetd, a *agent) {
			m := a.m.root.(fstest.MapFS)
			delete(m, "proc/cmdline")
			delete(m, "proc/net/route")
			m["sys/class/net/eth0/flags"] = &fstest.MapFile{Data: []byte("0x1002\n")}
		}, code: exitLocal, not: local, check: notAdmitted,
			stderr: "hookos-attest: no boot interface: no interface has the MAC hw_addr= names, carries the default route, or is up with an Ethernet MAC; name it with -interface or FLEET_INTERFACE\n"},
		{name: "the-boot-record-cannot-be-written", setup: func(t *testing.T, f *fleetd, a *agent) {
			file := filepath.Join(filepath.Dir(a.bootDir), "file")
			os.WriteFile(file, nil, 0o600)
			a.env["FLEET_BOOT_DIR"] = filepath.Join(file, "fleet")
		}, code: exitLocal, not: local, stderr: "hookos-attest: record this boot: ", unwritten: true, check: notAdmitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleetd(t)
			if !tc.noEntry {
				f.approve(t, softTPM())
			}
			a := newAgent(t, f)
			if tc.setup != nil {
				tc.setup(t, f, a)
			}
			if tc.earlier != "" {
				if err := disksafe.WriteBootRecord(a.bootDir, disksafe.BootRecord{BootID: tc.earlier, Attested: true, Code: testCode}); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			stdout, stderr := a.runExits(t, tc.code, tc.args...)
			for _, s := range tc.has {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout holds %q:\n%s", s, stdout)
				}
			}
			if !strings.HasPrefix(stdout, tc.prefix) || !strings.HasSuffix(stdout, tc.suffix) || !strings.HasPrefix(stderr, tc.stderr) {
				t.Errorf("stdout = %q, want it to begin %q and end %q; stderr = %q, want it to begin %q", stdout, tc.prefix, tc.suffix, stderr, tc.stderr)
			}
			if d := time.Since(start); tc.quick && d > 10*time.Second {
				t.Errorf("five tries with no back-off took %v", d)
			}
			if tc.unwritten {
				if r, err := disksafe.ReadBootRecord(a.bootDir); err == nil {
					t.Errorf("record = %v, want none", r)
				}
			} else {
				a.wantRecord(t, tc.attested)
			}
			if tc.check != nil {
				tc.check(t, f, a)
			}
		})
	}

	// A description or system name that does not fit is left out.
	p, err := claimedPort(&lldpwait.Neighbor{ChassisID: "c", PortID: "Port 5", PortDescription: strings.Repeat("d", 256), SystemName: "sw"})
	if err != nil || p.PortDescription != "" || p.SystemName != "sw" || p.PortID != "Port 5" {
		t.Errorf("claimedPort = %+v, %v", p, err)
	}
}

// admittedWithoutPort checks that the agent waited for a frame on waited
// ("": it did not listen), and that fleetd took its claim, with no switch
// port, before it answered the agent.
func admittedWithoutPort(waited string) func(t *testing.T, f *fleetd, a *agent) {
	return func(t *testing.T, f *fleetd, a *agent) {
		if a.waited != waited {
			t.Errorf("waited on %q, want %q", a.waited, waited)
		}
		select {
		case c := <-f.claims:
			if c.LLDP != nil {
				t.Errorf("claimed port %+v", c.LLDP)
			}
		default:
			t.Error("fleetd admitted no claim")
		}
	}
}

// notAdmitted checks that fleetd admitted no claim.
func notAdmitted(t *testing.T, f *fleetd, _ *agent) {
	select {
	case c := <-f.claims:
		t.Errorf("fleetd admitted %v", c)
	default:
	}
}

func TestSettings(t *testing.T) {
	f := newFleetd(t).approve(t, softTPM())
	a := newAgent(t, f)
	a.env["FLEET_LLDP_WAIT"] = "5s"
	a.env["FLEET_INTERFACE"] = "eth1"
	a.m.root.(fstest.MapFS)["sys/class/net/eth1/address"] = &fstest.MapFile{Data: []byte("3c:ec:ef:12:34:57\n")}
	code, _, stderr := a.run(t)
	if code != exitAttested || a.waited != "eth1" || a.wait != 5*time.Second {
		t.Fatalf("exit %d, waited on %q for %v, stderr %q", code, a.waited, a.wait, stderr)
	}
	if c := <-f.claims; c.MAC.String() != "3c:ec:ef:12:34:57" {
		t.Errorf("claimed MAC %s, want eth1's", c.MAC)
	}

	// Flags win over the environment.
	bootDir := filepath.Join(t.TempDir(), "other")
	var path string
	a.m.openTPM = func(p string) (tpmDevice, error) { path = p; return a.tpm, nil }
	code, _, stderr = a.run(t, "-interface", "eth0", "-lldp-wait", "2s", "-boot-dir", bootDir, "-tpm", "/dev/tpm0", "-url", f.url, "-ca", f.caFile)
	if code != exitAttested || a.waited != "eth0" || a.wait != 2*time.Second || path != "/dev/tpm0" {
		t.Fatalf("exit %d, waited on %q for %v, TPM %q, stderr %q", code, a.waited, a.wait, path, stderr)
	}
	if r, err := disksafe.ReadBootRecord(bootDir); err != nil || !r.Attested {
		t.Errorf("record in -boot-dir: %v, %v", r, err)
	}
	<-f.claims

	// The TPM's default is the kernel's resource manager.
	code, _, _ = a.run(t)
	if code != exitAttested || path != attest.DefaultDevice {
		t.Errorf("exit %d, TPM %q", code, path)
	}
	<-f.claims
}

func TestUsage(t *testing.T) {
	env := map[string]string{"FLEETD_URL": "https://fleetd.example:8443/attest"}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no URL", nil, map[string]string{}, "hookos-attest: no fleetd URL: set FLEETD_URL or -url"},
		{"http URL", []string{"-url", "http://fleetd.example/attest"}, env, `the fleetd URL "http://fleetd.example/attest" is not an https URL`},
		{"extra argument", []string{"now"}, env, `unexpected arguments ["now"]`},
		{"unknown flag", []string{"-force"}, env, "flag provided but not defined: -force"},
		{"bad wait", nil, map[string]string{"FLEETD_URL": env["FLEETD_URL"], "FLEET_LLDP_WAIT": "35"}, `FLEET_LLDP_WAIT="35" is not a duration`},
		{"negative wait", []string{"-lldp-wait", "-1s"}, env, "-lldp-wait -1s is negative"},
		{"relative event log", []string{"-event-log", "eventlog"}, env, `the event log "eventlog" is not an absolute path`},
		{"missing CA file", []string{"-ca", "/nonexistent/ca.pem"}, env, "hookos-attest: fleetd's CA: open /nonexistent/ca.pem"},
		{"a CA file without a certificate", []string{"-ca", notPEM}, env, "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(t.Context(), tt.args, func(k string) string { return tt.env[k] }, machine{root: fstest.MapFS{}}, &out, &errb)
			if code != exitUsage || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q, want it to hold %q", code, errb.String(), tt.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-help"}, func(string) string { return "" }, machine{}, &out, &errb); code != 0 {
		t.Errorf("-help exits %d", code)
	}
	for _, s := range []string{"FLEETD_URL", "FLEETD_CA", "FLEET_INTERFACE", "FLEET_LLDP_WAIT", "FLEET_TPM", "FLEET_EVENT_LOG", "FLEET_BOOT_DIR",
		"-lldp-wait", "(default 35s)", "/dev/tpmrm0", "/run/fleet", "hw_addr=", "Exit codes: 0 attested"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("-help does not say %q:\n%s", s, errb.String())
		}
	}
}

func TestBootInterface(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name   string
		change func(m fstest.MapFS)
		want   string
	}{
		{"hw_addr names the boot MAC", func(m fstest.MapFS) {
			// even against the default route
			m["proc/net/route"] = file("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
				"eth1\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\n")
		}, "eth0"},
		{"hw_addr in capitals", func(m fstest.MapFS) {
			m["proc/cmdline"] = file("hw_addr=3C:EC:EF:12:34:57 quiet\n")
		}, "eth1"},
		{"no hw_addr: the default route", func(m fstest.MapFS) {
			m["proc/cmdline"] = file("console=tty0\n")
			m["proc/net/route"] = file("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
				"eth0\t00000000\t0100000A\t0003\t0\t0\t200\t00000000\n" +
				"eth1\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\n" +
				"eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\n")
		}, "eth1"},
		{"a default route that is down does not count", func(m fstest.MapFS) {
			m["proc/cmdline"] = file("console=tty0\n")
			m["proc/net/route"] = file("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n" +
				"eth1\t00000000\t0100000A\t0002\t0\t0\t0\t00000000\n")
		}, "eth0"},
		{"hw_addr of no interface, no routes: the first up Ethernet", func(m fstest.MapFS) {
			m["proc/cmdline"] = file("hw_addr=02:00:00:00:00:01\n")
			delete(m, "proc/net/route")
			m["sys/class/net/eth0/flags"] = file("0x1002\n") // down
			m["sys/class/net/eth1/flags"] = file("0x1003\n")
		}, "eth1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := hookOS()
			tt.change(m)
			got, err := bootInterface(m)
			if err != nil || got != tt.want {
				t.Errorf("bootInterface = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// TestOutcomes/no-boot-interface runs the agent with every Ethernet down.
	if _, err := bootInterface(fstest.MapFS{}); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bootInterface without /sys/class/net: %v", err)
	}
}

func TestStopped(t *testing.T) {
	f := newFleetd(t).approve(t, softTPM())
	a := newAgent(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	a.m.waitLLDP = func(ctx context.Context, ifname string, cfg *lldpwait.Config) (*lldpwait.Neighbor, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var out, errb bytes.Buffer
	code := run(ctx, nil, func(k string) string { return a.env[k] }, a.m, &out, &errb)
	if code != exitNoVerdict || strings.Contains(out.String(), "attest: ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
