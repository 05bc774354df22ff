// Command hookos-attest is the HookOS boot agent of a fleet machine: on
// every boot, before the Tinkerbell agent starts, it learns the machine's
// switch port from LLDP, attests the machine's TPM to fleetd, prints the
// runbook's console lines, and records this boot's attestation and install
// code where the run's actions read it.
//
//	hookos-attest [-url URL] [-ca FILE] [-interface NAME] [-lldp-wait D] [-tpm PATH] [-event-log FILE] [-boot-dir DIR]
//
// In order, it:
//
//  1. records this boot as not attested (disksafe.WriteBootRecord in the
//     boot directory), so that nothing a run reads can stand for this boot
//     before fleetd's verdict does;
//  2. chooses the boot interface and reads its MAC (see below);
//  3. waits on that interface for the switch's LLDP frame (lldpwait.Wait);
//     when none comes within the wait, it says so and claims no switch port,
//     and fleetd journals "attested no switch port";
//  4. reads the SMBIOS serial (/sys/class/dmi/id/product_serial) and opens
//     the TPM;
//  5. attests (attest.Run) to fleetd over HTTPS, printing the console lines
//     below; the proof carries the TPM's quote of PCRs 0-7 of every active
//     PCR bank and the UEFI event log, which fleetd replays to each bank
//     and reads the Secure Boot state from;
//  6. records this boot's attestation: whether it passed and the install
//     code fleetd answered, if any, and then prints "install code written".
//     The code is a secret: it is never printed, only written to the record
//     (mode 0600 in a tmpfs). The record is the only way the code reaches
//     the run's actions: the Workflow carries only its SHA-256, and the
//     wipe-disk and install actions read the code from the record and
//     check that it hashes to that value.
//
// The console shows, word for word:
//
//	attest: PASSED
//	attest: FAILED <verdict>        e.g. attest: FAILED pending-approval
//	attest: FAILED                  fleetd refused the claim without a verdict
//	attest: try N failed            try N got no verdict; after try 5 it gives up
//	install code written            after a PASSED that answered a code
//
// each attest line followed by a line "attest: <reason>" where fleetd or the
// error gave one, and before them a line "lldp: ..." that names the switch
// port or says why the claim carries none.
//
// # Settings
//
// Each flag has an environment variable; a flag given on the command line
// wins over its variable.
//
//	-url        FLEETD_URL       fleetd's attest URL (https only), e.g.
//	                             https://fleetd.example:8443/attest; required
//	-ca         FLEETD_CA        PEM file of the CA that signed fleetd's
//	                             certificate; default: the system's roots
//	-interface  FLEET_INTERFACE  the interface the machine booted from;
//	                             default: chosen as below
//	-lldp-wait  FLEET_LLDP_WAIT  how long to wait for the switch's LLDP frame
//	                             (default 35s); 0 claims no switch port without
//	                             listening
//	-tpm        FLEET_TPM        the TPM device (default /dev/tpmrm0), or the
//	                             unix socket of a TPM server (see below)
//	-event-log  FLEET_EVENT_LOG  the UEFI event log sent with the TPM's quote
//	                             (an absolute path); default: the firmware's,
//	                             /sys/kernel/security/tpm0/binary_bios_measurements,
//	                             with a TPM device, and none with a TPM server
//	-boot-dir   FLEET_BOOT_DIR   where this boot's attestation is recorded
//	                             (default /run/fleet); the wipe-disk action
//	                             reads the same directory
//
// # A TPM server
//
// When -tpm names a unix socket rather than a device, the agent connects to
// it and speaks the TPM's command stream there: a software TPM such as swtpm
// started with
//
//	swtpm socket --tpm2 --tpmstate dir=DIR --server type=unixio,path=SOCKET --flags not-need-init,startup-clear
//
// stands for the machine's TPM, as in a test machine without a TPM device.
// The server must already be started up (startup-clear): the agent sends no
// TPM2_Startup and uses no control channel. The firmware's event log does
// not describe such a TPM's PCRs, so none is sent unless -event-log names
// the log of the boot measured into it.
//
// # The boot interface
//
// Without -interface, the boot interface is, first that applies:
//
//  1. the interface whose MAC is hw_addr= on the kernel command line, which
//     Tinkerbell's iPXE script sets to the MAC the machine netbooted with
//     (and uses as the worker ID the run's Workflow names);
//  2. the interface of the default IPv4 route (/proc/net/route), the lowest
//     metric first;
//  3. the first interface, by name, that is up, Ethernet and not loopback,
//     with a MAC.
//
// Interfaces are read from /sys/class/net.
//
// # Exit codes
//
//	0  attested (attest: PASSED), with or without an install code
//	1  fleetd refused the machine (attest: FAILED, with a verdict or
//	   without one)
//	2  usage: a bad flag or setting, no fleetd URL, an unreadable CA file
//	3  no verdict: fleetd never answered (attest: try 5 failed), or the
//	   agent was stopped first
//	4  this machine cannot attest or record its attestation: no boot ID, no
//	   boot interface or MAC, no SMBIOS serial, no TPM, or the boot record
//	   cannot be written
//
// # In HookOS
//
// HookOS is LinuxKit: run the agent as an onboot container, after the one
// that brings the network up and before the services (the Tinkerbell agent
// among them) start, so that every run of the boot finds its record. It
// needs the host's network namespace (the boot interface, its routes, the
// raw LLDP socket), /dev (the TPM), /sys (interfaces and SMBIOS), /run/fleet
// bound from the host (the record, read later by wipe-disk in its own
// container), every capability, and FLEETD_URL and FLEETD_CA in its
// environment, with the CA file bound in. Whatever its exit code, the
// record says whether this boot passed, and a run's wipe-disk refuses a
// boot that did not. examples/hookos/hookos-attest.yaml is that container
// as a LinuxKit snippet for HookOS's image definition.
//
// # Privileges and platforms
//
// It runs as root in HookOS: the TPM device, the SMBIOS serial and the raw
// LLDP socket need it. Listening for LLDP and opening a TPM device work on
// Linux only; elsewhere the program builds, listens for nothing (claiming no
// port) and fails to open a TPM device, exiting 4; a TPM server's socket
// opens there too.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/lldpwait"
)

// Exit codes.
const (
	exitAttested  = 0
	exitRefused   = 1
	exitUsage     = 2
	exitNoVerdict = 3
	exitLocal     = 4
)

// defaultLLDPWait is the runbook's wait for the switch's frame.
const defaultLLDPWait = 35 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, machine{}, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// tpmDevice is what the agent needs of a TPM: attestation, and Close.
type tpmDevice interface {
	attest.TPM
	io.Closer
}

// machine is the agent's view of the machine it runs on. A zero field is
// the real thing.
type machine struct {
	// root is the machine's root file system, from which /proc (boot ID,
	// kernel command line, routes) and /sys (interfaces, SMBIOS) are read.
	// nil: os.DirFS("/").
	root fs.FS
	// openTPM opens the TPM at path, a device or a TPM server's unix
	// socket. nil: openTPM.
	openTPM func(path string) (tpmDevice, error)
	// waitLLDP waits on ifname for the switch's frame. nil: lldpwait.Wait.
	waitLLDP func(ctx context.Context, ifname string, cfg *lldpwait.Config) (*lldpwait.Neighbor, error)
	// backoff is attest.ClientConfig.Backoff. nil: attest's default.
	backoff func(try int) time.Duration
	// now is the clock of the boot record. nil: time.Now.
	now func() time.Time
}

func (m machine) withDefaults() machine {
	if m.root == nil {
		m.root = os.DirFS("/")
	}
	if m.openTPM == nil {
		m.openTPM = openTPM
	}
	if m.waitLLDP == nil {
		m.waitLLDP = lldpwait.Wait
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// settings are the agent's flags and environment.
type settings struct {
	url, ca, ifname, tpm, bootDir string
	eventLog                      string // "": attest's default
	lldpWait                      time.Duration
}

const usageText = `usage: hookos-attest [-url URL] [-ca FILE] [-interface NAME] [-lldp-wait D] [-tpm PATH] [-event-log FILE] [-boot-dir DIR]

Attests this machine's TPM to fleetd from HookOS and records this boot's
attestation and install code for the run's actions. Each flag's environment
variable is named in brackets; a flag wins over its variable.

`

// parse reads the flags over the environment.
func parse(args []string, getenv func(string) string, stderr io.Writer) (settings, int, bool) {
	fl := flag.NewFlagSet("hookos-attest", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fl.PrintDefaults()
		fmt.Fprint(stderr, `
Without -interface the boot interface is the one whose MAC is hw_addr= on
the kernel command line, else the one of the default route, else the first
that is up, Ethernet and not loopback.

Exit codes: 0 attested, 1 refused by fleetd, 2 usage, 3 no verdict (fleetd
never answered), 4 this machine cannot attest or record it.
`)
	}
	or := func(env, def string) string {
		if v := getenv(env); v != "" {
			return v
		}
		return def
	}
	var s settings
	fl.StringVar(&s.url, "url", getenv("FLEETD_URL"), "fleetd's attest `URL`, https only, e.g. https://fleetd.example:8443/attest [FLEETD_URL]")
	fl.StringVar(&s.ca, "ca", getenv("FLEETD_CA"), "PEM `file` of the CA that signed fleetd's certificate; empty: the system's roots [FLEETD_CA]")
	fl.StringVar(&s.ifname, "interface", getenv("FLEET_INTERFACE"), "the boot `interface`; empty: chosen as below [FLEET_INTERFACE]")
	fl.StringVar(&s.tpm, "tpm", or("FLEET_TPM", attest.DefaultDevice), "the TPM `device`, or a TPM server's unix socket [FLEET_TPM]")
	fl.StringVar(&s.eventLog, "event-log", getenv("FLEET_EVENT_LOG"), "the UEFI event log `file` sent with the TPM's quote, an absolute path; empty: the firmware's with a TPM device, none with a TPM server [FLEET_EVENT_LOG]")
	fl.StringVar(&s.bootDir, "boot-dir", or("FLEET_BOOT_DIR", disksafe.DefaultBootDir), "`directory` of this boot's attestation record, read by wipe-disk [FLEET_BOOT_DIR]")
	wait := defaultLLDPWait
	if v := getenv("FLEET_LLDP_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(stderr, "hookos-attest: FLEET_LLDP_WAIT=%q is not a duration such as 35s\n", v)
			return s, exitUsage, false
		}
		wait = d
	}
	fl.DurationVar(&s.lldpWait, "lldp-wait", wait, "how long to wait for the switch's LLDP frame; 0: claim no switch port without listening [FLEET_LLDP_WAIT]")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return s, 0, false
		}
		return s, exitUsage, false
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "hookos-attest: unexpected arguments %q\n", fl.Args())
		return s, exitUsage, false
	}
	if s.url == "" {
		fmt.Fprintln(stderr, "hookos-attest: no fleetd URL: set FLEETD_URL or -url, e.g. https://fleetd.example:8443/attest")
		return s, exitUsage, false
	}
	if !strings.HasPrefix(s.url, "https://") {
		fmt.Fprintf(stderr, "hookos-attest: the fleetd URL %q is not an https URL\n", s.url)
		return s, exitUsage, false
	}
	if s.eventLog != "" && !strings.HasPrefix(s.eventLog, "/") {
		fmt.Fprintf(stderr, "hookos-attest: the event log %q is not an absolute path\n", s.eventLog)
		return s, exitUsage, false
	}
	if s.lldpWait < 0 {
		fmt.Fprintf(stderr, "hookos-attest: -lldp-wait %v is negative\n", s.lldpWait)
		return s, exitUsage, false
	}
	return s, 0, true
}

// run is the agent; getenv reads its environment and m is the machine.
func run(ctx context.Context, args []string, getenv func(string) string, m machine, stdout, stderr io.Writer) int {
	s, code, ok := parse(args, getenv, stderr)
	if !ok {
		return code
	}
	m = m.withDefaults()
	client, err := httpClient(s.ca)
	if err != nil {
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitUsage
	}

	// Nothing stands for this boot until fleetd's verdict does.
	bootID, err := disksafe.BootID(&disksafe.Config{Root: m.root})
	if err != nil {
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitLocal
	}
	if err := disksafe.WriteBootRecord(s.bootDir, disksafe.BootRecord{BootID: bootID, Time: m.now()}); err != nil {
		fmt.Fprintf(stderr, "hookos-attest: record this boot: %v\n", err)
		return exitLocal
	}

	ifname := s.ifname
	if ifname == "" {
		if ifname, err = bootInterface(m.root); err != nil {
			fmt.Fprintf(stderr, "hookos-attest: %v; name it with -interface or FLEET_INTERFACE\n", err)
			return exitLocal
		}
	}
	mac, err := interfaceMAC(m.root, ifname)
	if err != nil {
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitLocal
	}
	port := switchPort(ctx, m, ifname, s.lldpWait, stdout)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "hookos-attest: stopped before attesting")
		return exitNoVerdict
	}

	dmi, err := fs.Sub(m.root, "sys/class/dmi/id")
	if err != nil {
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitLocal
	}
	serial, err := attest.ReadSerial(dmi)
	if err != nil {
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitLocal
	}
	tpm, err := m.openTPM(s.tpm)
	if err != nil {
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitLocal
	}
	defer tpm.Close()

	cfg := &attest.ClientConfig{HTTPClient: client, Backoff: m.backoff, Console: stdout}
	if s.eventLog != "" {
		// Read from the machine's root, where the path is absolute.
		name := strings.TrimPrefix(path.Clean(s.eventLog), "/")
		cfg.EventLog = func() ([]byte, error) { return fs.ReadFile(m.root, name) }
	}
	res, err := attest.Run(ctx, s.url, tpm, attest.Machine{Serial: serial, MAC: mac, LLDP: port}, cfg)
	switch {
	case errors.Is(err, attest.ErrNoVerdict), ctx.Err() != nil:
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitNoVerdict
	case errors.Is(err, attest.ErrBadURL):
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitUsage
	case errors.Is(err, attest.ErrRefused):
		// fleetd refused the claim without a verdict (attest: FAILED and
		// its reason): recorded below as not attested, like any refusal.
	case err != nil:
		fmt.Fprintf(stderr, "hookos-attest: %v\n", err)
		return exitLocal
	}

	rec := disksafe.BootRecord{BootID: bootID, Attested: res.Verdict == attest.Attested, Time: m.now()}
	if rec.Attested {
		rec.Code = res.InstallCode
	}
	if err := disksafe.WriteBootRecord(s.bootDir, rec); err != nil {
		// The record of step 1 stands: this boot is not attested.
		fmt.Fprintf(stderr, "hookos-attest: record this boot's attestation: %v\n", err)
		return exitLocal
	}
	if !rec.Attested {
		return exitRefused
	}
	if rec.Code != "" {
		fmt.Fprintln(stdout, "install code written")
	}
	return exitAttested
}

// switchPort waits for the switch's LLDP frame on ifname and returns the
// port to claim, or nil (no frame, or listening failed: both said on
// stdout, where the console shows them).
func switchPort(ctx context.Context, m machine, ifname string, wait time.Duration, stdout io.Writer) *attest.LLDP {
	if wait == 0 {
		fmt.Fprintf(stdout, "lldp: not listening on %s (-lldp-wait 0); attesting with no switch port\n", ifname)
		return nil
	}
	n, err := m.waitLLDP(ctx, ifname, &lldpwait.Config{Wait: wait})
	switch {
	case errors.Is(err, lldpwait.ErrTimeout):
		fmt.Fprintf(stdout, "lldp: no LLDP frame on %s within %v; attesting with no switch port\n", ifname, wait)
		return nil
	case err != nil:
		fmt.Fprintf(stdout, "lldp: %v; attesting with no switch port\n", err)
		return nil
	}
	p, err := claimedPort(n)
	if err != nil {
		fmt.Fprintf(stdout, "lldp: %v; attesting with no switch port\n", err)
		return nil
	}
	desc := p.PortID
	if p.PortDescription != "" {
		desc += " (" + p.PortDescription + ")"
	}
	if p.SystemName != "" {
		desc += " of " + p.SystemName
	}
	fmt.Fprintf(stdout, "lldp: %s is on switch port %s\n", ifname, desc)
	return p
}

// maxLLDPField is the longest field a claim carries (attest.LLDP).
const maxLLDPField = 255

// claimedPort turns the switch's frame into the claim's port. The chassis
// and port IDs name the port, so one that does not fit a claim is an
// error; a description or system name that does not fit is left out.
func claimedPort(n *lldpwait.Neighbor) (*attest.LLDP, error) {
	if len(n.ChassisID) > maxLLDPField || len(n.PortID) > maxLLDPField {
		return nil, fmt.Errorf("the switch's frame names its port in more than %d bytes", maxLLDPField)
	}
	p := &attest.LLDP{
		ChassisIDSubtype: uint8(n.ChassisIDSubtype),
		ChassisID:        n.ChassisID,
		PortIDSubtype:    uint8(n.PortIDSubtype),
		PortID:           n.PortID,
	}
	if len(n.PortDescription) <= maxLLDPField {
		p.PortDescription = n.PortDescription
	}
	if len(n.SystemName) <= maxLLDPField {
		p.SystemName = n.SystemName
	}
	return p, nil
}

// httpClient trusts the CA in caFile, or the system's roots when caFile is
// "".
func httpClient(caFile string) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("fleetd's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fleetd's CA: %s holds no PEM certificate", caFile)
		}
		tc.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.Proxy = nil // HookOS reaches fleetd directly
	return &http.Client{Transport: tr}, nil
}

// interfaceMAC reads ifname's MAC from /sys/class/net.
func interfaceMAC(root fs.FS, ifname string) (net.HardwareAddr, error) {
	if !validIfname(ifname) {
		return nil, fmt.Errorf("%q is not an interface name", ifname)
	}
	b, err := fs.ReadFile(root, "sys/class/net/"+ifname+"/address")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no interface %s", ifname)
		}
		return nil, fmt.Errorf("the MAC of %s: %w", ifname, err)
	}
	mac, err := net.ParseMAC(strings.TrimSpace(string(b)))
	if err != nil || len(mac) != 6 || isZero(mac) {
		return nil, fmt.Errorf("%s has no Ethernet MAC (%q)", ifname, strings.TrimSpace(string(b)))
	}
	return mac, nil
}
