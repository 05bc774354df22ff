// Package inventory reads and checks the nodes file, the list of machines a
// cluster may have, and keeps NetBox, where each machine's lifecycle lives,
// in step with it.
//
// The nodes file (clusters/<cluster>/inventory/nodes.yaml in the runbook's
// layout) is what an operator edits in "Declare the node". Load checks it
// against the cluster topology (clusters/<cluster>/config/cluster-topology.json)
// and reports every problem at once, each as
//
//	FILE:LINE:COL: node NAME: problem
//
// so that a plan fails before anything reaches NetBox.
//
// # The nodes file
//
// A nodes file has three mappings: models, classes and nodes.
//
//	models:
//	  ms-01:                      # a key of the hardware inventory
//	    manufacturer: Minisforum  # required: NetBox manufacturer
//	    name: MS-01               # required: NetBox device type
//	    disk: /dev/nvme0n1        # optional: install disk of its nodes
//	classes:
//	  controlplane:               # a Talos class
//	    type: controlplane        # required: controlplane or worker
//	    installer_image: factory.talos.dev/installer/<schematic>:v1.13.9  # required, pinned by tag or digest
//	  worker:
//	    type: worker
//	    installer_image: factory.talos.dev/installer/<schematic>:v1.13.9
//	nodes:
//	  w-01:                       # host name: a DNS label
//	    model: ms-01              # required: a key under models
//	    serial: MS01-2407-0021    # required: the SMBIOS serial
//	    class: worker             # required: a key under classes
//	    switch_port: 5            # required: the switch port it stays on
//	    address: 10.40.0.21       # required: its static address, in K8S_NODE_CIDR
//	    bmc: amt                  # required: amt, ipmi, redfish or none
//	    disk: /dev/nvme0n1        # the install disk; required unless the model names one
//	    disk_serial: S6B0NL0W412345A   # the install disk's serial; a run waits until it is declared
//	    approved_ek_rsa2048: 1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c
//	    approved_ek_eccp256: 8fcef54df4c28620c6043ddab91157dcff92bc0d571c008d267674d1228c42fc
//
// The approved_ek_* fields hold the approved EK binding: the SHA-256 of each
// EK public key's DER SubjectPublicKeyInfo, as 64 lowercase hex characters,
// from independent evidence (a receiving scan, or the supplier's
// authenticated record). An entry without them attests as
// pending-approval; ApprovalLines formats the two lines for a waiting
// claim, and printing them approves nothing.
//
// Anchors, aliases and merge keys (<<) work as YAML defines them, so common
// fields can be shared.
//
// # What Load refuses
//
//   - an unknown model or class;
//   - an address, switch port, serial, disk serial or approved EK that another
//     node holds (both nodes and both places are named);
//   - an approved EK hash that is not 64 lowercase hex characters;
//   - an address that is malformed, carries a prefix length, or lies outside
//     K8S_NODE_CIDR (or is its network or broadcast address);
//   - a missing required field, an empty value, an unknown field (a typo
//     such as disk_seral is named, with the field it resembles), a field
//     given twice;
//   - a host name given twice or that is not a DNS label;
//   - a model or class lacking its required fields, an unpinned installer
//     image;
//   - a file that is not YAML, or a topology without a valid K8S_NODE_CIDR
//     and an API_SERVER_IP inside it.
//
// Problems come back as a Problems error; errors.Is(err, ErrInvalid) finds
// it. A bad file never panics.
//
// # NetBox
//
// NetBox holds each machine's lifecycle. NewNetBox returns fleet's client of
// it, built on go-netbox v4.3.0. fleetd reads devices (DeviceBySerial,
// Device, Devices, DevicesWithDesiredAction), records attestations
// (RecordAttestation: the MAC as a MAC address object made its interface's
// primary MAC, then the attested_* fields and attest_verdict; or RecordMAC
// or RecordDeviceMAC, then UpdateDevice, which writes the attestation,
// last_run and desired_action in one request), sets status, desired_action
// and last_run, journals on devices (Journal, and JournalEntries with
// NetBox's bulk create), and reads a serial's binding in two requests
// (BindingBySerial; DeviceBinding returns the device it read too, so that
// an admission does not read it again): the changelog must show
// NetBoxConfig.BindingAuthor making the last write of each approved_ek_*
// field that holds a value, and no other user's write of either field
// since, else the binding is unauthored (ek-binding-unauthored). That holds
// for an empty binding too: one another user cleared is unauthored, one
// never written or cleared by the author is not. A serial that more than
// one device holds is a *DuplicateSerialError naming them all. The data
// model and custom fields are listed on NetBox.
//
// Plan compares the nodes file with NetBox; Apply writes the difference with
// bulk requests: planned devices with serial, device type (the model key is
// the type's slug), class, bmc, install_disk, install_disk_serial and the
// approved EK binding, an interface holding the address (the primary IPv4,
// with K8S_NODE_CIDR's prefix length) and a cable to the switch port, and no
// MAC. It never deletes a device and never touches what fleetd owns. A plan
// right after an apply is empty; planning 10,000 nodes takes 37 requests.
// Plan.String reads as terraform plan does.
//
// Errors wrap ErrUnavailable, ErrNotFound, ErrRefusedToken,
// ErrDuplicateSerial (from the lookups by serial) and, from Plan,
// ErrConflict. Package netboxtest is an in-process NetBox 4.3 for tests,
// checked against NetBox's own OpenAPI document.
//
// # Concurrency
//
// Load, Parse and ParseTopology are safe to call from many goroutines; an
// Inventory is never changed after they return it. A NetBox client is safe
// for concurrent use, and concurrent calls of Journal, RecordMAC,
// RecordDeviceMAC and the interface reads of DeviceBySerial and Device
// share requests: a call that finds none of its kind in flight is sent at
// once, and those that come meanwhile go together in the next (bulk
// creates and updates, lists of several devices), so that a boot storm of
// many machines costs a few requests for them.
package inventory
