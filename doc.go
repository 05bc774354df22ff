// Package fleet is an SDK for provisioning bare-metal Kubernetes nodes that
// prove who they are. Each of its packages does one job of the runbook
// "Provision a node", and each can be imported on its own.
//
// # The flow of one node
//
//  1. Declare. An operator adds the machine to the nodes file: host name,
//     model, SMBIOS serial, Talos class, switch port, address, BMC type,
//     install disk and its serial, and the approved EK binding (the hashes
//     of the TPM's RSA-2048 and ECC P-256 endorsement keys, from
//     independent evidence). Package inventory checks the file and reports
//     every problem as FILE:LINE:COL, then plans and applies it to NetBox:
//     a planned device with its address, its cable to the switch port, and
//     no MAC.
//
//  2. Boot. The machine netboots HookOS. Package lldpwait listens for the
//     switch's LLDP frame (35 s at most) and names the port the machine is
//     plugged into.
//
//  3. Attest. Package attest's client, in HookOS, reads both EKs, makes an
//     attestation key and claims the serial, MAC and switch port to
//     fleetd, and quotes PCRs 0-7 with the UEFI event log. attest's
//     server, in fleetd, proves the machine holds every EK it presented by
//     TPM credential activation, checks the quote and replays the log,
//     then judges the binding: attested, pending-approval,
//     ek-hash-mismatch, ek-missing or ek-binding-unauthored. The console
//     shows attest: PASSED or attest: FAILED.
//
//  4. Admit. fleetd records the MAC and what was attested on the NetBox
//     device, checks the switch port (lldpwait: "on port N, expected M"),
//     and package provision decides: provision now (a worker, with
//     auto-provision on), or wait for desired_action=provision (a control
//     plane, auto-provision off, or a last run not repeated). A class may
//     require Secure Boot (secure_boot: required): its machines get an
//     install code only when the boot their TPM quoted, with the event
//     log replayed, had Secure Boot on.
//
//  5. Provision. Package provision renders the node's Talos machine config
//     (static address, install disk, installer image, a fresh bootstrap
//     token), hands it to package configserve under a new install code,
//     answers the code to HookOS, and starts Tinkerbell Workflow
//     provision-<node>-<unix seconds>, which names the code by its SHA-256
//     alone; Rufio power-cycles machines that wait.
//
//  6. Wipe. The Workflow's wipe-disk action runs package disksafe: it erases
//     the install disk only when exactly one disk reports the declared
//     serial, that disk is the declared one, it is neither removable nor on
//     USB, and this boot passed attestation and holds the install code
//     whose SHA-256 the Workflow names. Then the installer writes Talos,
//     with that code from this boot's record.
//
//  7. Fetch. The installed Talos fetches its config from configserve by
//     install code: served once, only while NetBox shows the device planned,
//     and counted as served only when the node's kernel acknowledged every
//     byte.
//
//  8. Active. provision watches the Workflow to its end, journals the
//     outcome on the device, and NetBox takes the device active.
//
// # Packages
//
//   - inventory: the nodes file, and NetBox (devices, journal, changelog,
//     plan/apply). inventory/netboxtest is an in-process NetBox for tests.
//   - lldpwait: wait for the switch's LLDP frame, name and check the port.
//   - attest: EK-bound admission by TPM credential activation, client and
//     server. attest/attesttest gives tests real and software TPMs;
//     attest/spentlease shares spent sessions between replicas as
//     Kubernetes Leases.
//   - provision: Talos configs, bootstrap tokens, Tinkerbell Workflows and
//     Rufio jobs, and the watch of every run.
//   - disksafe: find the declared install disk by serial and wipe it only
//     when that is provably safe.
//   - configserve: hold each rendered config in memory and serve it once.
//
// attest, lldpwait, disksafe and configserve import no Kubernetes, Talos or
// NetBox code, so a HookOS action or another controller can use them alone.
// The binaries under examples/ compose the packages: fleetctl for
// operators, fleetd for the server side.
package fleet
