package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Interface flags and types as /sys/class/net shows them
// (include/uapi/linux/if.h, if_arp.h).
const (
	iffUp        = 0x1
	iffLoopback  = 0x8
	arphrdEther  = 1
	maxIfnameLen = 15 // IFNAMSIZ - 1
)

// bootInterface chooses the interface the machine booted from: the one
// whose MAC is hw_addr= on the kernel command line, else the one of the
// default route, else the first that is up, Ethernet and not loopback.
func bootInterface(root fs.FS) (string, error) {
	ifs, err := interfaces(root)
	if err != nil {
		return "", err
	}
	if mac, ok := cmdlineMAC(root); ok {
		for _, i := range ifs {
			if bytes.Equal(i.mac, mac) {
				return i.name, nil
			}
		}
	}
	if name, ok := defaultRoute(root); ok && slices.ContainsFunc(ifs, func(i netif) bool { return i.name == name }) {
		return name, nil
	}
	for _, i := range ifs {
		if i.up && !i.loopback && i.ether && len(i.mac) == 6 && !isZero(i.mac) {
			return i.name, nil
		}
	}
	return "", errors.New("no boot interface: no interface has the MAC hw_addr= names, carries the default route, or is up with an Ethernet MAC")
}

// netif is one interface as /sys/class/net shows it.
type netif struct {
	name     string
	mac      net.HardwareAddr // nil when unreadable
	up       bool
	loopback bool
	ether    bool
}

// interfaces reads /sys/class/net, sorted by name.
func interfaces(root fs.FS) ([]netif, error) {
	entries, err := fs.ReadDir(root, "sys/class/net")
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var ifs []netif
	for _, e := range entries {
		name := e.Name()
		if !validIfname(name) {
			continue
		}
		dir := "sys/class/net/" + name + "/"
		i := netif{name: name}
		if b, err := fs.ReadFile(root, dir+"address"); err == nil {
			i.mac, _ = net.ParseMAC(strings.TrimSpace(string(b)))
		}
		if b, err := fs.ReadFile(root, dir+"flags"); err == nil {
			if f, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 32); err == nil {
				i.up = f&iffUp != 0
				i.loopback = f&iffLoopback != 0
			}
		}
		if b, err := fs.ReadFile(root, dir+"type"); err == nil {
			i.ether = strings.TrimSpace(string(b)) == strconv.Itoa(arphrdEther)
		}
		ifs = append(ifs, i)
	}
	slices.SortFunc(ifs, func(a, b netif) int { return strings.Compare(a.name, b.name) })
	return ifs, nil
}

// cmdlineMAC returns the MAC of hw_addr= on the kernel command line, which
// Tinkerbell's iPXE script sets to the MAC the machine netbooted with.
func cmdlineMAC(root fs.FS) (net.HardwareAddr, bool) {
	b, err := fs.ReadFile(root, "proc/cmdline")
	if err != nil {
		return nil, false
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "hw_addr="); ok {
			mac, err := net.ParseMAC(v)
			if err == nil && len(mac) == 6 && !isZero(mac) {
				return mac, true
			}
		}
	}
	return nil, false
}

// defaultRoute returns the interface of the default IPv4 route with the
// lowest metric, from /proc/net/route.
func defaultRoute(root fs.FS) (string, bool) {
	b, err := fs.ReadFile(root, "proc/net/route")
	if err != nil {
		return "", false
	}
	best, bestMetric := "", uint64(0)
	sc := bufio.NewScanner(bytes.NewReader(b))
	first := true
	for sc.Scan() {
		if first { // the header: Iface Destination Gateway Flags ...
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&0x1 == 0 { // RTF_UP
			continue
		}
		metric, err := strconv.ParseUint(f[6], 10, 32)
		if err != nil {
			continue
		}
		if best == "" || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	return best, best != "" && validIfname(best)
}

// validIfname reports whether name can be an interface's, so that it can
// name a path under /sys/class/net.
func validIfname(name string) bool {
	return name != "" && len(name) <= maxIfnameLen && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/ \t\n\x00:")
}

func isZero(mac net.HardwareAddr) bool {
	for _, b := range mac {
		if b != 0 {
			return false
		}
	}
	return true
}
