package provision

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/fleetkit/fleet/inventory"
)

// The real tink-controller (Tinkerbell v0.25.0) reads a device's Hardware
// as fleet writes it: the Rufio netboot Job it makes for a run that boots
// the machine into HookOS sets the one-time PXE boot in EFI mode.
func TestIntegrationNetbootJobBootsUEFI(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	tinktest.Start(t, env, ns, nil)
	dyn, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	p := &Provisioner{cfg: Config{Namespace: ns}}
	dev := inventory.Device{
		ID:          1,
		Name:        "node-01",
		MAC:         net.HardwareAddr{0x02, 0, 0, 0, 0, 1},
		Address:     netip.MustParsePrefix("10.0.0.21/24"),
		InstallDisk: "/dev/nvme0n1",
		BMC:         "amt",
	}
	hw := p.hardware(dev)
	data := "version: \"0.1\"\nname: netboot\nglobal_timeout: 600\ntasks:\n  - name: run\n    worker: \"{{.device_1}}\"\n    actions:\n      - name: hello\n        image: 127.0.0.1:5000/hello:v1\n        timeout: 60\n"
	wf := tinkerbell.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "netboot-run", Namespace: ns},
		Spec: tinkerbell.WorkflowSpec{
			TemplateRef: "netboot",
			HardwareRef: dev.Name,
			HardwareMap: map[string]string{ValueMAC: dev.MAC.String()},
			BootOptions: tinkerbell.BootOptions{BootMode: tinkerbell.BootModeNetboot},
		},
	}
	for _, o := range []struct {
		obj  any
		kind string
	}{
		{&hw, "Hardware"},
		{&tinkerbell.Template{ObjectMeta: metav1.ObjectMeta{Name: "netboot", Namespace: ns}, Spec: tinkerbell.TemplateSpec{Data: &data}}, "Template"},
		{&wf, "Workflow"},
	} {
		u, err := toUnstructured(o.obj, tinkerbell.GroupVersion.WithKind(o.kind))
		if err != nil {
			t.Fatal(err)
		}
		res := tinkerbell.GroupVersion.WithResource(map[string]string{"Hardware": "hardware", "Template": "templates", "Workflow": "workflows"}[o.kind])
		if _, err := dyn.Resource(res).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", o.kind, err)
		}
	}

	// The Job is read as the API server holds it: v0.25.0's controller
	// writes the one-time boot as oneTimeBootDeviceAction, which the API
	// types deprecate in favour of bootDevice; either is taken.
	var tasks []any
	for {
		u, err := dyn.Resource(JobResource).Namespace(ns).Get(ctx, "netboot-"+wf.Name, metav1.GetOptions{})
		if err == nil {
			tasks, _, _ = unstructured.NestedSlice(u.Object, "spec", "tasks")
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("tink-controller made no netboot Job for Workflow %s: %v", wf.Name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var boots []map[string]any
	for _, task := range tasks {
		m, _ := task.(map[string]any)
		for _, key := range []string{"oneTimeBootDeviceAction", "bootDevice"} {
			if b, ok := m[key].(map[string]any); ok {
				boots = append(boots, b)
			}
		}
	}
	if len(boots) != 1 || boots[0]["efiBoot"] != true {
		t.Errorf("the netboot Job's boot-device tasks = %v, want one with efiBoot true: the Hardware says UEFI", boots)
	}
}
