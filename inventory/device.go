package inventory

import (
	"net"
	"net/netip"
	"time"
)

// Status is a NetBox device status: the lifecycle stage of one machine.
// The zero value is invalid.
type Status string

// The statuses fleet reads and writes. NetBox knows others (offline, staged,
// inventory, failed); they pass through as they are.
const (
	StatusPlanned         Status = "planned"
	StatusActive          Status = "active"
	StatusDecommissioning Status = "decommissioning"
	StatusOffline         Status = "offline"
	StatusFailed          Status = "failed"
)

// JournalKind is the kind of a NetBox journal entry. The zero value is
// invalid.
type JournalKind string

// The journal kinds NetBox accepts.
const (
	JournalInfo    JournalKind = "info"
	JournalSuccess JournalKind = "success"
	JournalWarning JournalKind = "warning"
	JournalDanger  JournalKind = "danger"
)

// DesiredActionProvision is the desired_action value that asks fleetd for a
// provision run.
const DesiredActionProvision = "provision"

// Device is fleet's typed view of one NetBox device: what the nodes file
// declared, and what fleetd recorded since. A Device is a value; it does not
// change when NetBox does.
type Device struct {
	ID     int64  // NetBox's device ID
	Name   string // host name
	Serial string // SMBIOS serial
	Status Status
	Model  string // the nodes file's model key
	Class  string // Talos class, e.g. "worker" or "controlplane"
	BMC    string // BMC type, e.g. "amt", or "none"

	// Address is the node's primary IPv4 address with the prefix length of
	// K8S_NODE_CIDR; the zero Prefix when NetBox holds none.
	Address netip.Prefix
	// SwitchPort is the number of the switch port the device's cable runs
	// to; 0 when it has no cable.
	SwitchPort int

	InstallDisk       string // install_disk: a /dev path; "" when unset
	InstallDiskSerial string // install_disk_serial; "" when unset

	ApprovedEKHash    string // approved_ek_hash: the approved RSA-2048 EK
	ApprovedEKHashECC string // approved_ek_hash_ecc: the approved ECC P-256 EK

	// What the last attestation proved, written by fleetd.
	AttestedEKHash     string    // attested_ek_hash
	AttestedEKHashECC  string    // attested_ek_hash_ecc
	AttestedSwitchPort int       // attested_switch_port; 0: none recorded
	AttestedAt         time.Time // attested_at; zero: never
	AttestVerdict      string    // attest_verdict, e.g. "attested"
	AttestedSecureBoot string    // attested_secure_boot: on, off, unknown or unquoted; "": never recorded
	AttestedPCR7       string    // attested_pcr7: the quoted PCR 7, 64 lowercase hex; "" when not quoted

	DesiredAction string // desired_action; "" when unset
	LastRun       string // last_run: the name of the device's last Workflow

	// MAC is the primary MAC address of the device's interface; nil until
	// an attestation recorded it.
	MAC net.HardwareAddr
}

// Attestation is what fleetd records on a device after an attestation that
// proved the machine's EKs.
type Attestation struct {
	MAC        net.HardwareAddr // the MAC the machine claimed from
	EKHash     string           // attested_ek_hash: the proven RSA-2048 EK; "" if none
	EKHashECC  string           // attested_ek_hash_ecc: the proven ECC P-256 EK; "" if none
	SwitchPort int              // attested_switch_port; 0: the claim carried none
	At         time.Time        // attested_at
	Verdict    string           // attest_verdict, e.g. "attested"

	// SecureBoot is attested_secure_boot, the Secure Boot state of the
	// boot the TPM quoted: SecureBootOn, SecureBootOff, SecureBootUnknown
	// (the quote verified, but its event log does not tell the state), or
	// SecureBootUnquoted (the proof carried no quote). "" clears the field.
	SecureBoot string
	// PCR7 is attested_pcr7, the quoted PCR 7 (SHA-256 bank) as 64
	// lowercase hex characters; "" when the proof carried no quote.
	PCR7 string
}

// The values of Attestation.SecureBoot and Device.AttestedSecureBoot.
const (
	SecureBootOn       = "on"
	SecureBootOff      = "off"
	SecureBootUnknown  = "unknown"
	SecureBootUnquoted = "unquoted"
)
