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
//
// # Where to start reading
//
// Each step of the flow has one entry point; read it first, then what it
// calls:
//
//   - Declare: inventory.Load (or Parse) reads the nodes file;
//     inventory.NewNetBox's NetBox.Plan and NetBox.Apply bring NetBox to it.
//   - Boot: lldpwait.Listen, then Listener.Wait for the switch's frame;
//     lldpwait.Check compares the port with the declared one.
//   - Attest, in HookOS: attest.Run, the whole client side, over an
//     attest.TPM.
//   - Attest, in fleetd: attest.NewServer makes the http.Handler that
//     answers claims and proofs. attest.Judge is its verdict, a pure
//     function of the binding and what the TPM proved.
//   - Admit and provision: provision.New, then Provisioner.Admit for an
//     attested machine and Provisioner.Run (or RunLeader, for replicas) for
//     the loop that starts, watches and ends runs.
//   - Wipe: disksafe.Read and disksafe.Judge find the declared disk;
//     disksafe.Check adds the boot's proofs; disksafe.Wipe erases it only
//     when Check passes.
//   - Fetch: configserve.New makes the http.Handler that serves each
//     config once; Server.Put holds a rendered config under its code.
//
// # Where attestation hands over to admission
//
// attest and provision do not know each other; fleetd joins them
// (examples/fleetd/internal/daemon, glue.go). attest.Server judges a
// proof, and for an attested one calls the attest.AdmitFunc its Config
// names (attest.Config.Admit) with the attest.Claim: the serial, MAC, EK
// hashes, LLDP frame and quoted boot state. fleetd's admit turns that
// claim into a provision.Claim (the switch port named from the LLDP frame,
// Secure Boot from the replayed event log, a CheckPort closure over
// lldpwait.Check), calls Provisioner.Admit, and turns the
// provision.Decision back into an attest.Admission: the install code, or
// the reason there is none, which the machine's console prints. Rendered
// configs go the other way through provision.Deps.Configs, which fleetd
// backs with configserve.Server.Put; configserve's Events (served, not
// acknowledged, refetched, missing) come back to fleetd, which journals
// them on the NetBox device and takes a served device active.
package fleet
