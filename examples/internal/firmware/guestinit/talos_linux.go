//go:build linux

package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf16"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
)

// What the stand-in Talos reads.
const (
	cmdline = "/proc/cmdline"
	// addressCfg is the node's address (CIDR), which QEMU's fw_cfg gives
	// the machine where Talos would have it from DHCP.
	addressCfg = "/sys/firmware/qemu_fw_cfg/by_name/opt/fleet/address/raw"
	// trustedCA is the image's trust store: fleetd's CA.
	trustedCA = "/etc/talos/ca.pem"
	// talosIface is the interface the node's address goes on.
	talosIface = "eth0"
	// configArg is the kernel argument of the config's URL.
	configArg = "talos.config="
	// metaCode is META's key for the install code (DownloadURLCode),
	// which Talos puts for ${code} in the talos.config= URL.
	metaCode = 0x0b
	// efiGlobal is the GUID of the EFI global variables.
	efiGlobal = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
)

// fetchWait is how long the stand-in Talos tries to reach fleetd.
const fetchWait = 2 * time.Minute

// talosBoot reports whether this kernel booted the installed system: its
// command line names the config's URL.
func talosBoot() bool {
	b, err := os.ReadFile(cmdline)
	return err == nil && strings.Contains(string(b), configArg)
}

// talos stands in for the installed Talos's first boot: it says which boot
// entry the firmware booted, reads its install code from META on the disk
// it was installed to, fetches its config over HTTPS from the talos.config=
// URL with the code for ${code}, and checks that the config is a worker's
// machine config for this node.
func talos() error {
	say("talos: started")
	if err := loadModules(modulesList); err != nil {
		return err
	}
	if s, err := bootCurrent(); err != nil {
		say("talos: the firmware's BootCurrent: %v", err)
	} else {
		say("talos: the firmware booted %s", s)
	}

	b, err := os.ReadFile(cmdline)
	if err != nil {
		return err
	}
	var tmpl string
	for _, a := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(a, configArg); ok {
			tmpl = v
		}
	}
	say("talos: talos.config=%s", tmpl)
	if !strings.Contains(tmpl, "${code}") {
		return errors.New("talos: the talos.config= URL has no ${code}")
	}

	name, serial, code, err := findMeta()
	if err != nil {
		return err
	}
	say("talos: META on %s (serial %s) holds the install code", name, serial)

	addr, err := os.ReadFile(addressCfg)
	if err != nil {
		return fmt.Errorf("talos: the node's address: %w", err)
	}
	if err := network(talosIface, strings.TrimSpace(string(addr))); err != nil {
		return err
	}
	ip, _, _ := strings.Cut(strings.TrimSpace(string(addr)), "/")

	status, body, err := fetch(strings.ReplaceAll(tmpl, "${code}", code))
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("talos: fetched the config: %d %s", status, http.StatusText(status))
	}
	if err := checkConfig(body, ip, serial); err != nil {
		return fmt.Errorf("talos: the config fetched (%d bytes) %w", len(body), err)
	}
	say("talos: fetched the config: %d bytes, a worker's v1alpha1 machine config for %s, install disk serial %s", len(body), ip, serial)
	return nil
}

// findMeta finds the disk whose META holds the install code, and its
// serial as the kernel shows it.
func findMeta() (name, serial, code string, err error) {
	deadline := time.Now().Add(ifaceWait)
	for {
		blocks, _ := filepath.Glob("/sys/block/*")
		for _, blk := range blocks {
			name := filepath.Base(blk)
			if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") {
				continue
			}
			l, ok, err := readLayout(name)
			if err != nil || !ok {
				continue
			}
			code, ok := l.Meta[metaCode]
			if !ok || code == "" {
				return "", "", "", fmt.Errorf("talos: META on %s holds no install code", name)
			}
			for _, p := range []string{blk + "/device/serial", blk + "/serial"} {
				if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) != "" {
					serial = strings.TrimSpace(string(b))
					break
				}
			}
			return name, serial, code, nil
		}
		if time.Now().After(deadline) {
			return "", "", "", fmt.Errorf("talos: no disk holds META after %v", ifaceWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readLayout reads the stand-in installer's layout from the disk name
// (standin.ReadLayout).
func readLayout(name string) (standin.Layout, bool, error) {
	f, err := os.Open("/dev/" + name)
	if err != nil {
		return standin.Layout{}, false, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return standin.Layout{}, false, err
	}
	return standin.ReadLayout(f, size)
}

// fetch GETs url, trusting the image's CA, retrying while fleetd cannot be
// reached. The URL holds the install code: no error says it.
func fetch(url string) (int, []byte, error) {
	pem, err := os.ReadFile(trustedCA)
	if err != nil {
		return 0, nil, fmt.Errorf("talos: the trust store: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return 0, nil, errors.New("talos: the trust store holds no certificate")
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
	deadline := time.Now().Add(fetchWait)
	for {
		rsp, err := c.Get(url)
		if err == nil {
			defer rsp.Body.Close()
			b, err := io.ReadAll(rsp.Body)
			if err != nil {
				return 0, nil, errors.New("talos: reading the config failed")
			}
			return rsp.StatusCode, b, nil
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("talos: fleetd cannot be reached after %v", fetchWait)
		}
		time.Sleep(time.Second)
	}
}

// checkConfig checks that body is a Talos machine config for this node: a
// v1alpha1 document of a worker whose install disk is the one of serial,
// and a document giving the node's address ip.
func checkConfig(body []byte, ip, serial string) error {
	dec := yaml.NewDecoder(bytes.NewReader(body))
	var machine, addressed bool
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("is not YAML: %v", err)
		}
		if doc["version"] == "v1alpha1" {
			m, _ := doc["machine"].(map[string]any)
			inst, _ := m["install"].(map[string]any)
			sel, _ := inst["diskSelector"].(map[string]any)
			if m["type"] != "worker" {
				return fmt.Errorf("is of machine type %v, not worker", m["type"])
			}
			if sel["serial"] != serial {
				return fmt.Errorf("installs to the disk of serial %v, not %s", sel["serial"], serial)
			}
			machine = true
		}
		addrs, _ := doc["addresses"].([]any)
		for _, a := range addrs {
			am, _ := a.(map[string]any)
			if s, _ := am["address"].(string); strings.HasPrefix(s, ip+"/") {
				addressed = true
			}
		}
	}
	switch {
	case !machine:
		return errors.New("holds no v1alpha1 machine config")
	case !addressed:
		return fmt.Errorf("gives no document the address %s", ip)
	}
	return nil
}

// bootCurrent reads the firmware's BootCurrent and its Boot#### entry: its
// number, description and device path (the partition and the loader).
func bootCurrent() (string, error) {
	b, err := os.ReadFile(efivars + "/BootCurrent-" + efiGlobal)
	if err != nil {
		return "", err
	}
	if len(b) != 6 {
		return "", fmt.Errorf("BootCurrent holds %d bytes", len(b))
	}
	num := fmt.Sprintf("Boot%04X", binary.LittleEndian.Uint16(b[4:]))
	opt, err := os.ReadFile(efivars + "/" + num + "-" + efiGlobal)
	if err != nil {
		return num, err
	}
	desc, path, err := loadOption(opt[min(4, len(opt)):])
	if err != nil {
		return num, err
	}
	return fmt.Sprintf("%s %q: %s", num, desc, path), nil
}

// loadOption reads an EFI_LOAD_OPTION: its description and, of its device
// path, the hard drive's partition (HD(number,GPT,GUID)) and file path.
func loadOption(b []byte) (desc, path string, err error) {
	if len(b) < 6 {
		return "", "", errors.New("a short load option")
	}
	pathLen := int(binary.LittleEndian.Uint16(b[4:]))
	rest := b[6:]
	var u []uint16
	for len(rest) >= 2 {
		c := binary.LittleEndian.Uint16(rest)
		rest = rest[2:]
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	desc = string(utf16.Decode(u))
	if pathLen > len(rest) {
		return desc, "", errors.New("a short device path")
	}
	dp := rest[:pathLen]
	var parts []string
	for len(dp) >= 4 {
		typ, sub, n := dp[0], dp[1], int(binary.LittleEndian.Uint16(dp[2:]))
		if n < 4 || n > len(dp) {
			return desc, "", errors.New("a bad device path node")
		}
		node := dp[4:n]
		switch {
		case typ == 0x7f:
			dp = nil
			continue
		case typ == 0x04 && sub == 0x01 && len(node) >= 38:
			var g disksafe.GUID
			copy(g[:], node[20:36])
			parts = append(parts, fmt.Sprintf("HD(%d,GPT,%s)", binary.LittleEndian.Uint32(node), g))
		case typ == 0x04 && sub == 0x04:
			var f []uint16
			for i := 0; i+1 < len(node); i += 2 {
				if c := binary.LittleEndian.Uint16(node[i:]); c != 0 {
					f = append(f, c)
				}
			}
			parts = append(parts, string(utf16.Decode(f)))
		}
		dp = dp[n:]
	}
	return desc, strings.Join(parts, "/"), nil
}
