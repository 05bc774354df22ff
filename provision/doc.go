// Package provision runs a node from admission to an active node: it
// decides what an attested machine gets, renders its Talos machine config
// with a fresh bootstrap token, starts its Tinkerbell Workflow (with a Rufio
// power cycle where the machine must be booted into HookOS), watches every
// run to its end, and retires decommissioning devices with a wipe run.
//
// New takes the parts a Provisioner drives (Deps: NetBox, which
// inventory's client implements; the cluster, through client-go and
// github.com/tinkerbell/tinkerbell/api; Configs, where rendered configs wait
// under install codes, as configserve holds them), the Cluster every node
// joins, and an optional *Config.
//
// # Two ways a run starts
//
// Admit, at an attestation from HookOS, starts the run a device is due and
// answers its install code to that boot. Run (or Reconcile, one pass)
// starts the run desired_action asks for without a fresh claim: Rufio
// power-cycles a device with a BMC into HookOS, and its next attestation
// receives the code from Admit.
//
// # Refusals
//
// A device lacking a field a run needs, a switch port that does not match,
// a name that cannot name a Workflow, a class without an installer image,
// or a control plane fleetd cannot install is refused before anything is
// rendered: no token, no config, no code, no Workflow, so nothing can wipe
// a disk that nothing would install. Decision.Refusal says why (errors.Is
// finds ErrLacks, ErrNodeName, ErrClass, ErrControlPlanesOff or
// ErrNoBundleKeys), and the device's journal holds the runbook's line.
//
// # Secure Boot
//
// A class that requires Secure Boot (inventory.Class.RequireSecureBoot,
// the nodes file's secure_boot: required) gets an install code only for a
// boot the TPM quoted with Secure Boot on (Claim.Attestation.SecureBoot).
// Any other machine of the class is attested, and its boot recorded, but
// Admit answers NoProvision before anything is rendered, with the reason
// "Secure Boot is off", "Secure Boot is unknown: <why>" or "the TPM sent
// no quote of its boot", which the attest.install audit line carries and
// the device's journal holds, at every such attestation, as the warning
// "no provision: <reason>". A run that waits for the machine keeps
// waiting; a retirement is not held to the policy.
//
// # What operators see
//
// The NetBox journal lines (Admit and Reconcile list them), the
// attest.install and fleet.render audit records (Admit) and the bootstrap
// token Secrets (TokenGrace) are the runbook's, word for word.
//
// # Secrets
//
// Install codes, bootstrap tokens and rendered configs are secrets: no log
// record, journal line or Kubernetes object carries them; a Workflow names
// its code by its SHA-256 alone (CodeSHA256). The codes live only in the
// Provisioner's memory, so a restart loses those of waiting runs, and the
// machine's next attestation starts a new run in place of its waiting one.
//
// # Replicas
//
// Several replicas may admit machines at once; the loop runs on one of
// them at a time: RunLeader runs it while this replica holds a Lease
// (client-go's leader election), and a new leader's first pass reads every
// run from the cluster. A replica's install codes are its own: a machine
// whose waiting run another replica started gets that run's code from it
// (Config.PeerCode), or, when that replica has gone, a new run. With
// Config.Shared, of two runs of one device that two replicas start at
// once, the later gives way (ErrRunRaced), and a run another replica is
// still starting, however slowly, is neither replaced nor answered until
// it stands (the machine tries again).
//
// # Use
//
//	p, err := provision.New(provision.Deps{NetBox: nb, Kube: kube, Tink: dyn, Configs: configs},
//		provision.Cluster{...}, &provision.Config{
//			AutoProvision: true,
//			PortCheck:     func(declared, recorded int) error { return lldpwait.CheckRecorded(recorded, declared) },
//			Logger:        logger,
//		})
//	go p.Run(ctx)
//	// for each attestation that passed:
//	d, err := p.Admit(ctx, provision.Claim{Serial: s, Attestation: a, From: addr,
//		CheckPort: func(declared int) error { return lldpwait.Check(neighbor, declared, portCfg) }})
//	// answer d.Code to the HookOS client when it is set.
package provision
