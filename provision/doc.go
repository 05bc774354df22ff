// Package provision runs a node from admission to an active node: it
// decides what an attested machine gets, renders its Talos machine config
// with a fresh bootstrap token, starts its Tinkerbell Workflow (with a Rufio
// power cycle where the machine must be booted into HookOS), watches every
// run to its end, and retires decommissioning devices with a wipe run.
//
// provision talks to NetBox through the NetBox interface (inventory's
// client implements it), to the cluster through client-go (a
// kubernetes.Interface for bootstrap token Secrets, a dynamic.Interface for
// Tinkerbell's Workflow and Hardware and Rufio's Machine and Job objects,
// typed with github.com/tinkerbell/tinkerbell/api), and hands rendered
// configs to Configs (configserve in fleetd) under install codes. An
// admission costs NetBox one write of the device's fields (the attestation,
// with the last_run of the run it starts), the MAC's writes only when the
// device does not hold the claimed MAC yet, and a started run's journal
// line, which Config.JournalLater may queue; it reads nothing when the
// caller hands it the device (Claim.Device).
//
// # Two ways a run starts
//
// At an attestation, fleetd calls Admit with the claim and its switch-port
// judgement. A planned worker that never ran starts its run there when
// Config.AutoProvision is on; any device starts one when desired_action is
// provision; a decommissioning device starts its retirement. The machine
// is in HookOS already, so the Workflow has no boot job and the answered
// code reaches this boot.
//
// From desired_action, the loop (Run, or Reconcile per pass) starts the run
// of a device with a BMC without a fresh claim: it checks the switch port
// the device recorded (Config.PortCheck), renders, and creates the Workflow
// with boot mode netboot, so Tinkerbell's Rufio job power-cycles the
// machine into HookOS; its next attestation receives the run's code from
// Admit. A device without a BMC waits for an attestation (a power cycle by
// hand). desired_action is cleared when the run starts.
//
// A device lacking a field a run needs, a switch port that does not match,
// a class without an installer image, or a control plane that fleetd cannot
// install (Cluster.ControlPlanes off, or a bundle without the cluster's CA
// keys) is refused before anything is rendered: no token, no config, no
// code, no Workflow, so nothing can wipe a disk that nothing would install.
//
// # Journal lines
//
// provision writes these lines to the device's NetBox journal, word for
// word (<run> is provision-<node>-<unix seconds> or retire-<node>-<unix
// seconds>, <address> the address the machine attested from in HookOS):
//
//	info     started Workflow <run>; the machine attested from HookOS at <address>
//	         (a run that replaces a waiting run whose code fleetd lost adds "; it replaces Workflow <run>, whose install code fleetd no longer holds")
//	info     started Workflow <run>; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code
//	         (a retirement adds ", and the run wipes its install disk")
//	warning  refused a run before rendering anything: <the switch-port check's error, e.g. on port 7, expected 5>
//	warning  <node> lacks install_disk_serial: the run waits for install_disk_serial, and desired_action stays provision
//	         (the fields are MAC, install_disk and install_disk_serial, joined with ", " and " and ")
//	warning  <node> is a control plane, and fleetd runs without control-plane support (homelab.fleetd.controlPlanes): no run starts, nothing is wiped, and desired_action stays provision
//	warning  <node> is a control plane, and fleetd holds no secrets bundle with the cluster's CA keys: no run starts, nothing is wiped, and desired_action stays provision
//	info     <node> has no BMC: the run waits for the machine to attest from HookOS; power-cycle it by hand
//	success  Workflow <run> ended SUCCESS            (a retirement adds ": the install disk is wiped")
//	warning  Workflow <run> ended FAILED at action <action>; read its output with journalctl -t hookos HOOKOS_HOST=<address>
//	warning  Workflow <run> ended TIMEOUT at action <action>; read its output with journalctl -t hookos HOOKOS_HOST=<address>
//	danger   the same for a retirement, followed by "; the disk may not be wiped, so the node may still hold its data and its identity, and the device stays decommissioning"
//	warning  Workflow <run> never reported its first action within its global timeout (<timeout>); fleetd deleted it, no later boot resumes it, and the disk may be partly wiped or still hold the old install: set desired_action to provision
//	info     Workflow <run> passed its global timeout while <install|next-boot|reboot> was current; the node is active, so it has its config, and nothing else is done
//	warning  the node booted HookOS and attested after Workflow <run> succeeded: fix its boot order so the disk comes before PXE, then set desired_action to provision
//	warning  the Rufio job netboot-<run> of Workflow <run> failed to power the machine: <Rufio's message>; set AMT's address to <node address>, or power the machine on by hand
//
// The action an ended line names is the one that failed or timed out (the
// Workflow's own message says only "action completed"); its output is in
// HookOS's journal on the Tinkerbell host under the address the line gives.
// A line a waiting device repeats on every pass (lacking, refused, no BMC)
// is written once per process. Ended lines are written once per run: the
// Workflow is annotated afterwards, so a restart does not repeat them.
// The booted-HookOS line is written once per run as well, and then
// Config.BootedHookOSAfterInstall is called (fleetd counts it for
// FleetNodeBootedHookOSAfterInstall). After a failed Rufio job
// desired_action is set to provision again, so that a machine powered on by
// hand gets a run at its attestation; the loop power-cycles it again only
// after Config.PowerRetry.
//
// # Audit lines
//
// Admit ends in one slog record with the message attest.install and the
// attributes serial, outcome ("provision", "retire", "no provision",
// "refused"), reason, node, device and run. The reason of "no provision"
// is one of:
//
//	last run <run> is not repeated; set desired_action to provision
//	a control plane waits for desired_action=provision
//	auto-provision is off
//	the device is <status>, not planned
//	run <run> is in flight at action <action>
//
// Every render writes a fleet.render record with node, device, run, class,
// and bytes and token_expires, or error. When the bootstrap token cannot be
// created, both records carry the error
// "create <node>'s bootstrap token: <cause>", Admit returns it (errors.Is
// finds ErrBootstrapToken), and no code is answered.
//
// # Secrets
//
// Install codes, bootstrap tokens and rendered configs are secrets: no log
// record and no journal line carries them. The code goes to Configs and,
// in Admit's Decision, to the attested machine alone; no Kubernetes object
// carries it, nor the config URL that holds it. Whoever may read Workflows,
// and any machine that asks Tinkerbell for the actions of a run's MAC, reads
// the Workflow, so it names the code by its SHA-256 alone
// (install_code_sha256, CodeSHA256): the HookOS actions read the code from
// this boot's attestation record and refuse to wipe or install unless it
// hashes to that value.
//
// The codes of the runs a Provisioner started live only in its memory,
// until each run ends, as the configs under them live only in Configs. A
// run that waits for its machine after a restart has lost both, so the
// machine's attestation starts a new run in its place (the journal's
// started line adds "; it replaces Workflow <run>, whose install code
// fleetd no longer holds").
//
// # Bootstrap tokens
//
// Each render creates a Secret bootstrap-token-<id> in kube-system of type
// bootstrap.kubernetes.io/token, with usage-bootstrap-authentication and
// usage-bootstrap-signing, auth-extra-groups system:bootstrappers:nodes,
// and an expiration (RFC 3339) of the render time plus Config.ConfigTTL
// (FLEET_CONFIG_TTL) plus four hours (TokenGrace). The token is the
// config's cluster.token.
//
// # Rendered configs
//
// Render uses machinery's generate package with the cluster's secrets
// bundle, the class's installer image, the install disk by its serial alone
// (machine.install.diskSelector.serial = install_disk_serial), a
// HostnameConfig with the node's name, and the static address: a
// LinkAliasConfig named fleet0 that matches the NetBox MAC by CEL
// (mac(link.permanent_addr) == "...") and a LinkConfig fleet0 with the
// address in K8S_NODE_CIDR and a default route. Control planes get every
// control plane's address as API server and machine certificate SANs.
// Every config passes machinery's validation for an installed metal node
// and Check, which refuses what machinery accepts: a malformed
// cluster.token, an empty installer image, disk and selector both set, an
// address without its prefix.
//
// RenderClassInputs renders the class inputs of the next control plane: a
// YAML strategic merge patch of machine.certSANs and
// cluster.apiServer.certSANs holding every control plane's address (see its
// doc for the exact form), which the Talos root applies to its control
// plane class and which `fleetctl render-class-inputs` prints.
//
// # Restarts and the loop
//
// Runs are Workflows labelled app.kubernetes.io/managed-by=fleet and
// fleet.fleetkit.dev/device-id; each pass lists them (one call) and the
// devices (one NetBox call). A fleetd restart mid-run picks every run up
// from the cluster at the next pass; only the install codes of waiting
// runs are lost with it (see Secrets). The
// loop polls (Config.Interval, 15 s by default) rather than watches, and
// backs off to 5 minutes while passes fail.
//
// # Use
//
//	p, err := provision.New(netboxClient, kube, dyn, configs, provision.Cluster{...}, &provision.Config{
//		AutoProvision: true,
//		PortCheck:     func(declared, recorded int) error { return lldpwait.CheckRecorded(recorded, declared) },
//		Logger:        logger,
//	})
//	go p.Run(ctx)
//	// for each attestation that passed:
//	d, err := p.Admit(ctx, provision.Claim{Serial: s, Attestation: a, From: addr,
//		CheckPort: func(declared int) error { return lldpwait.Check(neighbor, declared, portCfg) }})
//	// answer d.Code to the HookOS client when it is set.
package provision
