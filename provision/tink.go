package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/fleetkit/fleet/internal/termsafe"
	"github.com/fleetkit/fleet/inventory"
	wfrun "github.com/fleetkit/fleet/provision/internal/runs"
)

// The resources provision reads and writes through the dynamic client.
var (
	WorkflowResource = tinkerbell.GroupVersion.WithResource("workflows")
	HardwareResource = tinkerbell.GroupVersion.WithResource("hardware")
	MachineResource  = bmc.GroupVersion.WithResource("machines")
	JobResource      = bmc.GroupVersion.WithResource("jobs")
	TaskResource     = bmc.GroupVersion.WithResource("tasks")
)

// The template values (the Workflow's hardwareMap) of every fleet run.
// The Templates fleet-provision and fleet-retire read them as
// {{.install_disk}} and so on. None is a secret: a Workflow is readable by
// whoever may read Workflows, and Tinkerbell hands its actions to any
// machine that asks with the run's MAC, so the install code (and the config
// URL, which carries it) reaches the machine only in the attestation
// answer. The Workflow names the code by its SHA-256 (CodeSHA256), which
// the actions compare with the code this boot received.
const (
	ValueMAC               = "device_1"
	ValueInstallDisk       = "install_disk"
	ValueInstallDiskSerial = "install_disk_serial"
	ValueInstallCodeSHA256 = wfrun.ValueInstallCodeSHA256
	ValueInstallerImage    = "installer_image"
)

// CodeSHA256 returns the SHA-256 of an install code as 64 lowercase hex
// characters: the run's ValueInstallCodeSHA256, as disksafe.CodeSHA256
// computes it on the machine.
func CodeSHA256(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// RunKind is the kind of a run, as its Workflow's name prefix and its run
// label (LabelRunKind) say. The zero value is invalid.
type RunKind string

// The kinds of run.
const (
	// RunProvision installs Talos: Workflow provision-<node>-<unix seconds>.
	RunProvision RunKind = "provision"
	// RunRetire wipes a decommissioning device's install disk: Workflow
	// retire-<node>-<unix seconds>.
	RunRetire RunKind = "retire"
)

// kindOf is the kind of r, as its run label says.
func kindOf(r *run) RunKind { return RunKind(r.Kind) }

// run is one fleet Workflow as read from the cluster.
type run = wfrun.Run

// runFrom reads a run.
func runFrom(u *unstructured.Unstructured, full bool) (*run, error) { return wfrun.From(u, full) }

// listRuns reads every fleet Workflow from the cluster: one API call.
func (p *Provisioner) listRuns(ctx context.Context) ([]*run, error) {
	l, err := p.tink.Resource(WorkflowResource).Namespace(p.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelManagedBy + "=" + managedBy,
	})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	runs := make([]*run, 0, len(l.Items))
	for i := range l.Items {
		r, err := runFrom(&l.Items[i], false)
		if err != nil {
			p.log.Warn("fleet.loop", "error", err.Error())
			continue
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// runsOf returns dev's runs, newest first, read from the cluster.
func (p *Provisioner) runsOf(ctx context.Context, id int64) ([]*run, error) {
	l, err := p.tink.Resource(WorkflowResource).Namespace(p.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelManagedBy + "=" + managedBy + "," + LabelDeviceID + "=" + strconv.FormatInt(id, 10),
	})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	var runs []*run
	for i := range l.Items {
		if r, err := runFrom(&l.Items[i], true); err == nil {
			runs = append(runs, r)
		}
	}
	sortNewest(runs)
	return runs, nil
}

func sortNewest(runs []*run) {
	slices.SortStableFunc(runs, func(a, b *run) int {
		if c := b.Created().Compare(a.Created()); c != 0 {
			return c
		}
		return strings.Compare(b.WF.Name, a.WF.Name)
	})
}

// annotate sets one annotation on a Workflow with a merge patch.
func (p *Provisioner) annotate(ctx context.Context, name, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	_, err = p.tink.Resource(WorkflowResource).Namespace(p.cfg.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotate workflow %s: %w", name, err)
	}
	return nil
}

// endRuns deletes the device's runs that have not ended, and those whose
// end is journaled, for a new run that replaces them: tink-server takes the
// first Workflow it finds for a worker (the machine's MAC), and serves it
// no action while that Workflow has ended, so an ended run left beside the
// new one would hold the machine's agent back (dropSuperseded deletes a run
// that ended meanwhile, once its end is journaled). runs, when set, are the
// device's runs as the caller
// read them under its lock (nothing in this process started a run since);
// nil: they are read here. A run is deleted only as it was read: a
// Workflow that changed since (Tinkerbell reported its end meanwhile) is
// kept from the stale read, and the runs are read again and judged anew.
//
// It returns every run of the device it saw, ended or not: the runs the
// new one supersedes.
func (p *Provisioner) endRuns(ctx context.Context, id int64, runs *[]*run) (seen []*run, err error) {
	err = retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		var list []*run
		if runs != nil {
			list, runs = *runs, nil
		} else {
			var err error
			if list, err = p.runsOf(ctx, id); err != nil {
				return err
			}
		}
		seen = list
		for _, r := range list {
			if r.Terminal() && r.Reported() == "" {
				continue // ended: its end is journaled first
			}
			var as metav1.Preconditions
			if r.WF.UID != "" {
				as.UID = &r.WF.UID
			}
			if r.WF.ResourceVersion != "" {
				as.ResourceVersion = &r.WF.ResourceVersion
			}
			err := p.tink.Resource(WorkflowResource).Namespace(p.cfg.Namespace).Delete(ctx, r.Name(), metav1.DeleteOptions{Preconditions: &as})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete workflow %s: %w", r.Name(), err)
			}
			p.dropCode(r.Name())
		}
		return nil
	})
	return seen, err
}

// dropSuperseded deletes the device's runs, but its newest, whose end is
// journaled (endRuns says why); runs are the device's, newest first, as a
// pass listed them.
func (p *Provisioner) dropSuperseded(ctx context.Context, runs []*run) error {
	for i, r := range runs {
		if i == 0 || r.Reported() == "" {
			continue
		}
		if err := p.deleteWorkflow(ctx, r.Name()); err != nil {
			return err
		}
		p.log.Info("fleet.loop", "run", r.Name(), "deleted", "its end is journaled, and run "+runs[0].Name()+" replaced it")
	}
	return nil
}

// annPastStop marks a Workflow that fleetd found RUNNING past its
// globalExecutionStop, with the time it did.
const annPastStop = "fleet.fleetkit.dev/past-stop"

// nudgePastStop annotates a RUNNING run past its globalExecutionStop, once,
// so that tink-controller reconciles it and ends it TIMEOUT. The
// controller sets the stop with a requeue at that time, but its queue
// keeps one entry per Workflow: the agent's next report, or any change of
// the Workflow, replaces the delayed entry with an immediate one, and the
// requeue at the stop is lost. A run whose agent died after its first
// action would then stay RUNNING until some change of the Workflow (or the
// controller's resync, hours later).
func (p *Provisioner) nudgePastStop(ctx context.Context, r *run, now time.Time) error {
	stop := r.WF.Status.GlobalExecutionStop
	if r.WF.Status.State != tinkerbell.WorkflowStateRunning || stop == nil || !now.After(stop.Time) || r.WF.Annotations[annPastStop] != "" {
		return nil
	}
	p.log.Info("fleet.loop", "run", r.Name(), "past_stop", stop.UTC().Format(time.RFC3339))
	return p.annotate(ctx, r.Name(), annPastStop, now.UTC().Format(time.RFC3339))
}

// ErrRunRaced is the error of a run that gave way to a run of the same
// device another Provisioner created at the same time (Config.Shared), or
// of an admission that met such a run still starting. Nothing of it
// stays; the machine's next attestation is decided once the other run is
// recorded, so a caller should have the machine try again (fleetd answers
// it as attest.ErrAdmitLater).
var ErrRunRaced = errors.New("provision: another replica started a run of the device at the same time")

// giveWay reads dev's runs after the Workflow of run was created, and
// returns ErrRunRaced when another run that has not ended was created
// before it, or in the same second: the API server stamps creation to the
// second, so two runs of one second both give way, and the next try finds
// neither.
func (p *Provisioner) giveWay(ctx context.Context, dev inventory.Device, run string) error {
	runs, err := p.runsOf(ctx, dev.ID)
	if err != nil {
		return err
	}
	var own *wfrun.Run
	for _, r := range runs {
		if r.Name() == run {
			own = r
		}
	}
	if own == nil {
		return fmt.Errorf("workflow %s: created, and then not listed", run)
	}
	for _, r := range runs {
		if r != own && !r.Terminal() && r.WF.DeletionTimestamp == nil && !r.WF.CreationTimestamp.After(own.WF.CreationTimestamp.Time) {
			return fmt.Errorf("%w: %s, with %s", ErrRunRaced, r.Name(), run)
		}
	}
	return nil
}

func (p *Provisioner) deleteWorkflow(ctx context.Context, name string) error {
	err := p.tink.Resource(WorkflowResource).Namespace(p.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete workflow %s: %w", name, err)
	}
	return nil
}

func hasBMC(dev inventory.Device) bool {
	b := strings.ToLower(strings.TrimSpace(dev.BMC))
	return b != "" && b != "none"
}

func toUnstructured(obj any, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// hardware returns the Hardware object NetBox's facts make for dev. Its
// DHCP says the machine boots by UEFI (dhcp.uefi), as every fleet node
// does (its Talos is installed for UEFI, with Secure Boot): Tinkerbell's
// controller copies it into the netboot Job it asks Rufio for (the
// one-time PXE boot's efiBoot), and without it a UEFI machine would be
// netbooted into HookOS in legacy mode.
func (p *Provisioner) hardware(dev inventory.Device) tinkerbell.Hardware {
	mac := dev.MAC.String()
	ip := &tinkerbell.IP{Address: dev.Address.Addr().String(), Family: 4}
	if dev.Address.Addr().Is6() {
		ip.Family = 6
	} else {
		ip.Netmask = netmask(dev.Address)
	}
	gw := p.cluster.Gateway
	if !gw.IsValid() {
		gw = dev.Address.Masked().Addr().Next()
	}
	ip.Gateway = gw.String()
	hw := tinkerbell.Hardware{
		ObjectMeta: metav1.ObjectMeta{
			Name:      dev.Name,
			Namespace: p.cfg.Namespace,
			Labels:    map[string]string{LabelManagedBy: managedBy, LabelDeviceID: strconv.FormatInt(dev.ID, 10)},
		},
		Spec: tinkerbell.HardwareSpec{
			Interfaces: []tinkerbell.Interface{{
				DHCP: &tinkerbell.DHCP{MAC: mac, Hostname: dev.Name, IP: ip, UEFI: true},
				Netboot: &tinkerbell.Netboot{
					AllowPXE:      new(true),
					AllowWorkflow: new(true),
				},
			}},
			Disks: []tinkerbell.Disk{{Device: dev.InstallDisk}},
		},
	}
	if hasBMC(dev) {
		group := bmc.GroupVersion.Group
		hw.Spec.BMCRef = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "Machine", Name: dev.Name}
	}
	return hw
}

func netmask(p netip.Prefix) string {
	var m [4]byte
	for i := 0; i < p.Bits() && i < 32; i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(m).String()
}

// ensureHardware creates dev's Hardware, or replaces its spec with NetBox's
// facts. It creates first, since a node's first run is the common case:
// one request. Others write the Hardware too (Tinkerbell toggles its
// netboot flags): when it exists, it is read and updated, and when it
// changed between the read and the write (a conflict) or went away, it is
// written once more, a few times at most.
func (p *Provisioner) ensureHardware(ctx context.Context, dev inventory.Device) error {
	hw := p.hardware(dev)
	c := p.tink.Resource(HardwareResource).Namespace(p.cfg.Namespace)
	raced := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }
	err := retry.OnError(retry.DefaultRetry, raced, func() error {
		u, err := toUnstructured(&hw, tinkerbell.GroupVersion.WithKind("Hardware"))
		if err != nil {
			return err
		}
		if _, err = c.Create(ctx, u, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			return err
		}
		old, err := c.Get(ctx, dev.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = c.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("hardware %s: %w", dev.Name, err)
	}
	return nil
}

// ensureMachine creates dev's Rufio Machine at the node's address when it
// has none. An existing Machine keeps its credentials and provider options,
// but its host is set to the node's address when it names another: Rufio
// reaches AMT at the node's address (the runbook sets it there). Like
// ensureHardware it creates first: one request for a node's first run.
func (p *Provisioner) ensureMachine(ctx context.Context, dev inventory.Device) error {
	c := p.tink.Resource(MachineResource).Namespace(p.cfg.Namespace)
	host := dev.Address.Addr().String()
	m := bmc.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name:      dev.Name,
			Namespace: p.cfg.Namespace,
			Labels:    map[string]string{LabelManagedBy: managedBy, LabelDeviceID: strconv.FormatInt(dev.ID, 10)},
		},
		Spec: bmc.MachineSpec{Connection: bmc.Connection{
			Host:          host,
			AuthSecretRef: corev1.SecretReference{Name: p.cfg.BMCSecret, Namespace: p.cfg.Namespace},
		}},
	}
	if strings.EqualFold(dev.BMC, "amt") {
		m.Spec.Connection.ProviderOptions = &bmc.ProviderOptions{IntelAMT: &bmc.IntelAMTOptions{HostScheme: "http"}}
	}
	u, err := toUnstructured(&m, bmc.GroupVersion.WithKind("Machine"))
	if err != nil {
		return err
	}
	_, err = c.Create(ctx, u, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("rufio machine %s: %w", dev.Name, err)
	}
	old, err := c.Get(ctx, dev.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("rufio machine %s: %w", dev.Name, err)
	}
	if h, _, _ := unstructured.NestedString(old.Object, "spec", "connection", "host"); h == host {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"connection": map[string]string{"host": host}}})
	if err != nil {
		return err
	}
	if _, err := c.Patch(ctx, dev.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("rufio machine %s: %w", dev.Name, err)
	}
	return nil
}

// newWorkflow creates the run's Workflow, which names code by its SHA-256
// alone. netboot asks Tinkerbell to power-cycle the machine into HookOS
// through a Rufio job first.
func (p *Provisioner) newWorkflow(ctx context.Context, dev inventory.Device, name string, kind RunKind, code, image, hookOS, token string, netboot bool, now time.Time) error {
	tpl := p.cfg.ProvisionTemplate
	if kind == RunRetire {
		tpl = p.cfg.RetireTemplate
	}
	values := map[string]string{
		ValueMAC:               dev.MAC.String(),
		ValueInstallDisk:       dev.InstallDisk,
		ValueInstallDiskSerial: dev.InstallDiskSerial,
		ValueInstallCodeSHA256: CodeSHA256(code),
		ValueInstallerImage:    image,
	}
	wf := tinkerbell.Workflow{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: p.cfg.Namespace,
			Labels: map[string]string{
				LabelManagedBy: managedBy,
				LabelDeviceID:  strconv.FormatInt(dev.ID, 10),
				LabelRunKind:   string(kind),
			},
			Annotations: map[string]string{annNode: dev.Name, annCreated: now.UTC().Format(time.RFC3339)},
		},
		Spec: tinkerbell.WorkflowSpec{
			TemplateRef: tpl,
			HardwareRef: dev.Name,
			HardwareMap: values,
		},
	}
	if hookOS != "" {
		wf.Annotations[annHookOS] = hookOS
	}
	if token != "" {
		wf.Annotations[annToken] = token
	}
	if netboot {
		wf.Spec.BootOptions.BootMode = tinkerbell.BootModeNetboot
	}
	u, err := toUnstructured(&wf, tinkerbell.GroupVersion.WithKind("Workflow"))
	if err != nil {
		return err
	}
	if _, err := p.tink.Resource(WorkflowResource).Namespace(p.cfg.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another replica started a run of the device in the same
			// second: its run stands.
			err = fmt.Errorf("%w: %w", ErrRunRaced, err)
		}
		return fmt.Errorf("create workflow %s: %w", name, err)
	}
	return nil
}

// bootJobMessage says why the run's Rufio job (Tinkerbell names it
// netboot-<workflow>) failed: its failed Task's message, else the Job's,
// else fallback (the Workflow's condition). own reports a failure of
// Rufio's own, with no BMC in it: the Job failed with a message of its
// own (Rufio says "task <ns>/<name> failed" for a Task that failed, and
// e.g. "failed to create Task ...: ... already exists" when its Job
// controller, its cache behind its own create, creates a Task twice), and
// no Task of it failed. A Job that cannot be read is not taken as Rufio's
// own.
func (p *Provisioner) bootJobMessage(ctx context.Context, r *run, fallback string) (job, msg string, own bool) {
	job = "netboot-" + r.Name()
	u, err := p.tink.Resource(JobResource).Namespace(p.cfg.Namespace).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		return job, fallback, false
	}
	var j bmc.Job
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &j) != nil {
		return job, fallback, false
	}
	msg = fallback
	for _, c := range j.Status.Conditions {
		if c.Type == bmc.JobFailed && c.Status == bmc.ConditionTrue && c.Message != "" {
			msg = c.Message
			own = !strings.HasPrefix(c.Message, "task ")
		}
	}
	// Rufio says on the Job only which Task failed ("task <ns>/<name>
	// failed"), and why on the Task: "failed to perform PowerAction: ...",
	// "Failed to connect to BMC: ...".
	for i := range j.Spec.Tasks {
		u, err := p.tink.Resource(TaskResource).Namespace(p.cfg.Namespace).Get(ctx, bmc.FormatTaskName(j, i), metav1.GetOptions{})
		if err != nil {
			continue
		}
		var task bmc.Task
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &task) != nil {
			continue
		}
		for _, c := range task.Status.Conditions {
			if c.Type == bmc.TaskFailed && c.Status == bmc.ConditionTrue && c.Message != "" {
				return job, oneLine(c.Message), false
			}
		}
	}
	return job, oneLine(msg), own
}

// oneLine makes a message from elsewhere (a BMC's, through Rufio) one
// journal line: its lines and runs of space joined by one space, runes
// that do not print escaped. bmclib lists the errors of its providers one
// per line.
func oneLine(msg string) string {
	return termsafe.Text(strings.Join(strings.Fields(msg), " "))
}
