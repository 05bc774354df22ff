package inventory

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

// cpTestClasses declares a control plane class, a worker class and a
// control plane class of another name, as a nodes file does.
var cpTestClasses = map[string]Class{
	"controlplane": {Name: "controlplane", Type: ControlPlane},
	"worker":       {Name: "worker", Type: Worker},
	"gpu-cp":       {Name: "gpu-cp", Type: ControlPlane},
}

func cpDevice(name, class, addr string, status Status) Device {
	d := Device{Name: name, Class: class, Status: status}
	if addr != "" {
		d.Address = netip.MustParsePrefix(addr)
	}
	return d
}

func TestRenderClassInputs(t *testing.T) {
	cpB := cpDevice("cp-b", "controlplane", "10.0.0.22/24", StatusPlanned)
	cpA := cpDevice("cp-a", "controlplane", "10.0.0.21/24", StatusActive)
	w := cpDevice("node-03", "worker", "10.0.0.23/24", StatusPlanned)
	got, err := RenderClassInputs([]Device{cpB, w, cpA}, cpTestClasses, []string{"api.folly.example", "10.0.0.10"})
	noErr(t, err)
	want := `# fleet render-class-inputs: the class inputs of the next control plane.
# Control planes: cp-a 10.0.0.21 (active), cp-b 10.0.0.22 (planned).
machine:
  certSANs:
    - "10.0.0.21"
    - "10.0.0.22"
    - "api.folly.example"
    - "10.0.0.10"
cluster:
  apiServer:
    certSANs:
      - "10.0.0.21"
      - "10.0.0.22"
      - "api.folly.example"
      - "10.0.0.10"
`
	if string(got) != want {
		t.Errorf("RenderClassInputs =\n%s\nwant\n%s", got, want)
	}

	if _, err := RenderClassInputs([]Device{w}, cpTestClasses, nil); !errors.Is(err, ErrNoControlPlanes) {
		t.Errorf("no control planes: %v", err)
	}
	if _, err := RenderClassInputs([]Device{cpB}, cpTestClasses, []string{"bad\n- san"}); err == nil {
		t.Error("a SAN with a newline was accepted")
	}
}

// A control plane is a device whose class the nodes file declares with
// type controlplane, whatever the class's name, and that holds an address.
func TestControlPlanes(t *testing.T) {
	devs := []Device{
		cpDevice("cp-1", "gpu-cp", "10.0.0.12/24", StatusActive),
		cpDevice("cp-2", "controlplane", "10.0.0.11/24", StatusPlanned),
		cpDevice("cp-noaddr", "controlplane", "", StatusPlanned),
		cpDevice("w-1", "worker", "10.0.0.21/24", StatusActive),
		cpDevice("x-1", "unknown", "10.0.0.31/24", StatusActive),
	}
	var names []string
	for _, d := range ControlPlanes(devs, cpTestClasses) {
		names = append(names, d.Name)
	}
	if want := []string{"cp-1", "cp-2"}; !slices.Equal(names, want) {
		t.Errorf("ControlPlanes = %v, want %v (in the order given)", names, want)
	}
	got := ControlPlaneSANs(devs, cpTestClasses, []string{" api.folly.example ", "10.0.0.11", ""})
	if want := []string{"10.0.0.11", "10.0.0.12", "api.folly.example"}; !slices.Equal(got, want) {
		t.Errorf("ControlPlaneSANs = %v, want %v (sorted addresses, then extra, no duplicates)", got, want)
	}
}
