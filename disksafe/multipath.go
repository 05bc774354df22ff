package disksafe

import "strings"

// MultipathLUN is one logical unit that the kernel lists as several disks,
// one per path to it, as a SAN or a dual-ported SAS disk shows through two
// host adapters: its paths report one serial, and share one WWN or are held
// by one dm-multipath device. It is a value.
type MultipathLUN struct {
	Paths  []string // the kernel names of its paths, e.g. sda and sdb
	WWN    string   // the WWN every path reports; "" when they do not share one
	Holder string   // the dm-multipath device that holds every path, e.g. dm-0; "" when none does
}

// String says what the paths are and what shows it: "sda and sdb are one
// multipath LUN (wwid naa.600a0b80001234, multipath device dm-0)".
func (m *MultipathLUN) String() string {
	var b strings.Builder
	for i, p := range m.Paths {
		switch {
		case i == 0:
		case i == len(m.Paths)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(p)
	}
	b.WriteString(" are one multipath LUN (")
	if m.WWN != "" {
		b.WriteString("wwid " + m.WWN)
		if m.Holder != "" {
			b.WriteString(", ")
		}
	}
	if m.Holder != "" {
		b.WriteString("multipath device " + m.Holder)
	}
	b.WriteString(")")
	return b.String()
}

// oneLUN returns the multipath logical unit whose paths are disks, when
// they are one: they all report one non-empty WWN, or one dm-multipath
// device holds them all. It returns nil for disks that are not one LUN,
// such as two namespaces of one NVMe controller (each has its own WWN).
func oneLUN(disks []*Disk) *MultipathLUN {
	if len(disks) < 2 {
		return nil
	}
	m := &MultipathLUN{WWN: disks[0].WWN, Holder: disks[0].Multipath}
	for _, d := range disks {
		if d.WWN != m.WWN {
			m.WWN = ""
		}
		if d.Multipath != m.Holder {
			m.Holder = ""
		}
		m.Paths = append(m.Paths, d.Name)
	}
	if m.WWN == "" && m.Holder == "" {
		return nil
	}
	return m
}
