package inventory

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Lean views of NetBox 4.3's answers: only the fields fleet reads, and
// tolerant of the nulls NetBox answers.

// The custom fields fleet keeps on a device.
const (
	cfClass              = "class"
	cfBMC                = "bmc"
	cfInstallDisk        = "install_disk"
	cfInstallDiskSerial  = "install_disk_serial"
	cfApprovedEKHash     = "approved_ek_hash"
	cfApprovedEKHashECC  = "approved_ek_hash_ecc"
	cfAttestedEKHash     = "attested_ek_hash"
	cfAttestedEKHashECC  = "attested_ek_hash_ecc"
	cfAttestedSwitchPort = "attested_switch_port"
	cfAttestedAt         = "attested_at"
	cfAttestVerdict      = "attest_verdict"
	cfAttestedSecureBoot = "attested_secure_boot"
	cfAttestedPCR7       = "attested_pcr7"
	cfDesiredAction      = "desired_action"
	cfLastRun            = "last_run"
)

// The NetBox object types fleet names.
const (
	typeDevice    = "dcim.device"
	typeInterface = "dcim.interface"
)

type nbRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Slug string `json:"slug"`
}

type nbChoice struct {
	Value string `json:"value"`
}

// cfText reads a custom-field value as text: null is "", a number or a
// boolean its JSON text, anything else its JSON.
type cfText string

func (t *cfText) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*t = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = cfText(s)
	default:
		*t = cfText(b)
	}
	return nil
}

// cfInt reads a custom-field value as an integer: null, or anything that
// is not one, is 0.
type cfInt int64

func (n *cfInt) UnmarshalJSON(b []byte) error {
	var t cfText
	if err := t.UnmarshalJSON(b); err != nil {
		return err
	}
	v, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil {
		v = 0
	}
	*n = cfInt(v)
	return nil
}

type nbDeviceFields struct {
	Class              cfText `json:"class"`
	BMC                cfText `json:"bmc"`
	InstallDisk        cfText `json:"install_disk"`
	InstallDiskSerial  cfText `json:"install_disk_serial"`
	ApprovedEKHash     cfText `json:"approved_ek_hash"`
	ApprovedEKHashECC  cfText `json:"approved_ek_hash_ecc"`
	AttestedEKHash     cfText `json:"attested_ek_hash"`
	AttestedEKHashECC  cfText `json:"attested_ek_hash_ecc"`
	AttestedSwitchPort cfInt  `json:"attested_switch_port"`
	AttestedAt         cfText `json:"attested_at"`
	AttestVerdict      cfText `json:"attest_verdict"`
	AttestedSecureBoot cfText `json:"attested_secure_boot"`
	AttestedPCR7       cfText `json:"attested_pcr7"`
	DesiredAction      cfText `json:"desired_action"`
	LastRun            cfText `json:"last_run"`
}

type nbDevice struct {
	ID         int64    `json:"id"`
	Name       *string  `json:"name"`
	Serial     string   `json:"serial"`
	Status     nbChoice `json:"status"`
	DeviceType struct {
		ID           int64  `json:"id"`
		Model        string `json:"model"`
		Slug         string `json:"slug"`
		Manufacturer nbRef  `json:"manufacturer"`
	} `json:"device_type"`
	Role       nbRef `json:"role"`
	Site       nbRef `json:"site"`
	PrimaryIP4 *struct {
		ID      int64  `json:"id"`
		Address string `json:"address"`
	} `json:"primary_ip4"`
	CustomFields nbDeviceFields `json:"custom_fields"`
}

func (d *nbDevice) name() string {
	if d.Name == nil {
		return ""
	}
	return *d.Name
}

type nbMAC struct {
	ID         int64  `json:"id"`
	MACAddress string `json:"mac_address"`
}

type nbPeer struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Type   nbChoice `json:"type"`
	Device struct {
		ID   int64   `json:"id"`
		Name *string `json:"name"`
	} `json:"device"`
}

type nbInterface struct {
	ID     int64    `json:"id"`
	Name   string   `json:"name"`
	Type   nbChoice `json:"type"`
	Device struct {
		ID   int64   `json:"id"`
		Name *string `json:"name"`
	} `json:"device"`
	Cable *struct {
		ID int64 `json:"id"`
	} `json:"cable"`
	LinkPeers     []nbPeer `json:"link_peers"`
	LinkPeersType *string  `json:"link_peers_type"`
	PrimaryMAC    *nbMAC   `json:"primary_mac_address"`
	MACAddresses  []nbMAC  `json:"mac_addresses"`
}

// peer returns the interface at the far end of the interface's cable, when
// the cable runs to exactly one interface.
func (i *nbInterface) peer() (nbPeer, bool) {
	if i == nil || i.Cable == nil || i.LinkPeersType == nil || *i.LinkPeersType != typeInterface || len(i.LinkPeers) != 1 {
		return nbPeer{}, false
	}
	return i.LinkPeers[0], true
}

// switchPort returns the number of the switch port the interface's cable
// runs to, or 0.
func (nb *NetBox) switchPort(i *nbInterface) int {
	p, ok := nb.peerPort(i)
	if !ok {
		return 0
	}
	return p
}

// peerPort returns the switch port the interface is cabled to, when the
// far end is an interface of the configured switch named as a port.
func (nb *NetBox) peerPort(i *nbInterface) (int, bool) {
	p, ok := i.peer()
	if !ok {
		return 0, false
	}
	if nb.cfg.Switch != "" && (p.Device.Name == nil || *p.Device.Name != nb.cfg.Switch) {
		return 0, false
	}
	n := nb.portNumber(p.Name)
	return n, n > 0
}

// view turns a device and its interface (nil: none) into a Device, and
// keeps the device's place for UpdateDevice (learn).
func (nb *NetBox) view(d *nbDevice, i *nbInterface) Device {
	cf := &d.CustomFields
	v := Device{
		ID:                 d.ID,
		Name:               d.name(),
		Serial:             d.Serial,
		Status:             Status(d.Status.Value),
		Model:              d.DeviceType.Slug,
		Class:              string(cf.Class),
		BMC:                string(cf.BMC),
		InstallDisk:        string(cf.InstallDisk),
		InstallDiskSerial:  string(cf.InstallDiskSerial),
		ApprovedEKHash:     string(cf.ApprovedEKHash),
		ApprovedEKHashECC:  string(cf.ApprovedEKHashECC),
		AttestedEKHash:     string(cf.AttestedEKHash),
		AttestedEKHashECC:  string(cf.AttestedEKHashECC),
		AttestedSwitchPort: int(cf.AttestedSwitchPort),
		AttestVerdict:      string(cf.AttestVerdict),
		AttestedSecureBoot: string(cf.AttestedSecureBoot),
		AttestedPCR7:       string(cf.AttestedPCR7),
		DesiredAction:      string(cf.DesiredAction),
		LastRun:            string(cf.LastRun),
	}
	if d.PrimaryIP4 != nil {
		if p, err := netip.ParsePrefix(d.PrimaryIP4.Address); err == nil {
			v.Address = p
		}
	}
	if cf.AttestedAt != "" {
		if t, err := time.Parse(time.RFC3339Nano, strings.Replace(string(cf.AttestedAt), " ", "T", 1)); err == nil {
			v.AttestedAt = t
		}
	}
	nb.viewInterface(&v, i)
	nb.learn(d)
	return v
}

// viewInterface sets what the device's interface i holds on v: its MAC and
// SwitchPort, zero when i is nil.
func (nb *NetBox) viewInterface(v *Device, i *nbInterface) {
	v.MAC, v.SwitchPort = nil, 0
	if i == nil {
		return
	}
	v.SwitchPort = nb.switchPort(i)
	if i.PrimaryMAC != nil {
		if mac, err := net.ParseMAC(i.PrimaryMAC.MACAddress); err == nil {
			v.MAC = mac
		}
	}
}

// nbChange is one changelog record of a device.
type nbChange struct {
	ID       int64    `json:"id"`
	Time     string   `json:"time"`
	UserName string   `json:"user_name"`
	Action   nbChoice `json:"action"`
	Pre      *struct {
		CustomFields map[string]cfText `json:"custom_fields"`
	} `json:"prechange_data"`
	Post *struct {
		CustomFields map[string]cfText `json:"custom_fields"`
	} `json:"postchange_data"`
}
