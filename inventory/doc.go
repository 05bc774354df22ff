// Package inventory reads and checks the nodes file, the list of machines a
// cluster may have, and keeps NetBox, where each machine's lifecycle lives,
// in step with it.
//
// The nodes file (clusters/<cluster>/inventory/nodes.yaml in the runbook's
// layout) is what an operator edits in "Declare the node"; its format is
// Inventory's. Load checks it against the cluster topology
// (clusters/<cluster>/config/cluster-topology.json) and reports every
// problem at once, each as
//
//	FILE:LINE:COL: node NAME: problem
//
// so that a plan fails before anything reaches NetBox. Problems come back as
// a Problems error (errors.Is finds ErrInvalid); a bad file never panics.
// Its classes say which devices are control planes (ControlPlanes,
// ControlPlaneSANs) and which require Secure Boot (secure_boot: required,
// Class.RequireSecureBoot), and RenderClassInputs renders from them the
// class inputs of the next control plane for the Talos root.
//
// # NetBox
//
// NewNetBox returns fleet's NetBox client (NetBox, whose documentation
// holds the data model). It reads devices and the binding of a serial,
// judged against NetBox's changelog (DeviceBinding); records attestations,
// statuses and runs; and journals on devices. Plan compares the nodes file
// with NetBox and Apply writes the difference with bulk requests: Plan never
// deletes a device and never touches what fleetd owns, and a plan right
// after an apply is empty. For a daemon that must not wait for NetBox,
// JournalQueue writes journal lines and statuses in the background,
// AddressBook finds devices by address from a cached list, and
// RefusalJournal journals refused attestation claims at most once per
// serial and period.
//
// Errors wrap ErrUnavailable, ErrNotFound, ErrRefusedToken,
// ErrDuplicateSerial and, from Plan, ErrConflict. Package netboxtest is an
// in-process NetBox 4.3 for tests, checked against NetBox's own OpenAPI
// document.
//
// # Concurrency
//
// Load, Parse and ParseTopology are safe to call from many goroutines; an
// Inventory is never changed after they return it. NetBox, JournalQueue,
// AddressBook and RefusalJournal are safe for concurrent use; concurrent
// NetBox calls of one kind share requests (see NetBox).
package inventory
