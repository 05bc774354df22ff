package provision

// The lines a Provisioner writes to a device's NetBox journal, each named
// once, as fmt formats: the runbook quotes them word for word, and the
// docs of Admit and Reconcile say when each is written. <run> is
// provision-<node>-<unix seconds> or retire-<node>-<unix seconds>.
const (
	// lineStarted (info): a run started; its note says how the machine
	// gets its code: noteAttested for an admission (with noteAt,
	// noteRetire and noteReplaces as they apply), noteRufio for a run the
	// loop started.
	lineStarted  = "started Workflow %s; %s"
	noteAttested = "the machine attested from HookOS"
	noteAt       = " at %s"
	noteRetire   = ", and the run wipes its install disk"
	noteReplaces = "; it replaces Workflow %s, whose install code fleetd no longer holds"
	noteRufio    = "Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"

	// lineRefused (warning): a run refused by the switch-port check, the
	// node's name or its class, before anything was rendered.
	lineRefused = "refused a run before rendering anything: %s"
	// lineLacks (warning, with tailWaits): a run that waits for the
	// device's fields.
	lineLacks = "%s lacks %s: the run waits for %s"
	// lineControlPlaneOff (warning, with tailWaits): a control plane
	// fleetd cannot install.
	lineControlPlaneOff = "%s is a control plane, and %v: no run starts, nothing is wiped"
	tailWaits           = ", and desired_action stays provision"
	// lineNoProvision (warning): a boot the class's Secure Boot policy
	// refuses, at every attestation.
	lineNoProvision = "no provision: %s"
	// lineBootedHookOS (warning): the node attested from HookOS after its
	// last run succeeded; once per run.
	lineBootedHookOS = "the node booted HookOS and attested after Workflow %s succeeded: fix its boot order so the disk comes before PXE, then set desired_action to provision"

	// lineEndedSuccess (success): a run that succeeded; a retirement adds
	// tailWiped.
	lineEndedSuccess = "Workflow %s ended SUCCESS"
	tailWiped        = ": the install disk is wiped"
	// lineEnded (warning; danger with tailDanger for a retirement): a run
	// that ended FAILED or TIMEOUT, at an action or before any reported.
	lineEnded  = "Workflow %s ended %s %s; read its output with journalctl -t hookos HOOKOS_HOST=%s"
	tailDanger = "; the disk may not be wiped, so the node may still hold its data and its identity, and the device stays decommissioning"
	// linePassed (info): a run past its global timeout while a late
	// action was current, on an active node.
	linePassed = "Workflow %s passed its global timeout while %s was current; the node is active, so it has its config, and nothing else is done"
	// lineNeverReported (warning), and lineNeverReportedRetire (danger,
	// with tailDanger): a run deleted because it never reported its first
	// action.
	lineNeverReported       = "Workflow %s never reported its first action within its global timeout (%s); fleetd deleted it, no later boot resumes it, and the disk may be partly wiped or still hold the old install: set desired_action to provision"
	lineNeverReportedRetire = "Workflow %s never reported its first action within its global timeout (%s); fleetd deleted it"
	// lineBMCFailed (warning): the BMC did not power the machine.
	lineBMCFailed = "the Rufio job %s of Workflow %s failed to power the machine: %s; set AMT's address to %s, or power the machine on by hand"
	// lineRufioFailed (warning): Rufio failed its job on its own side.
	lineRufioFailed = "the Rufio job %s of Workflow %s failed on Rufio's side, no BMC task failed: %s; fleetd starts a new run %v after this one started"
	// lineNoBMC and lineNoPortCheck (info): a run that waits for an
	// attestation the loop cannot bring.
	lineNoBMC       = "%s has no BMC: the run waits for the machine to attest from HookOS; power-cycle it by hand"
	lineNoPortCheck = "%s waits for an attestation from HookOS: fleetd has no switch-port check for a run without a fresh claim; power-cycle the machine"
	// lineUnknownAction (warning): a desired_action fleetd does not act
	// on.
	lineUnknownAction = "desired_action is %q, which fleetd does not act on: set it to %s to start a run, or clear it"
)
