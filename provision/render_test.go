package provision

import (
	"errors"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	coreconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/types/network"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"

	"github.com/fleetkit/fleet/internal/deptest"
	"github.com/fleetkit/fleet/inventory"
)

const testToken = "abcdef.0123456789abcdef"

func renderOf(t *testing.T, c Cluster, dev inventory.Device, sans []string) coreconfig.Provider {
	t.Helper()
	b, err := c.Render(dev, testToken, sans)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configloader.NewFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A node's config as its device and class say: a worker's, rendered
// without the CA keys, a control plane's with the SANs in its API server's
// and machine's certificates, and those of classes named neither "worker"
// nor "controlplane", whose type in the nodes file decides the machine
// type and whose installer image is used. (An undeclared class:
// TestRenderRefuses.)
func TestRender(t *testing.T) {
	for _, tc := range []struct {
		class       string
		machineType string
		image       string
		sans        []string
	}{
		{ClassWorker, "worker", "factory.talos.dev/metal-installer/abc:v1.13.9", nil},
		{ClassControlPlane, "controlplane", "factory.talos.dev/metal-installer/def:v1.13.9", []string{"10.0.0.21", "10.0.0.22", "api.folly.example"}},
		{"storage", "worker", "factory.talos.dev/installer/storage:v1.13.9", nil},
		{"gpu-cp", "controlplane", "factory.talos.dev/installer/gpu:v1.13.9", []string{"10.0.0.11"}},
	} {
		t.Run(tc.class, func(t *testing.T) {
			c := testCluster(t)
			c.Classes["storage"] = inventory.Class{Name: "storage", Type: inventory.Worker, InstallerImage: "factory.talos.dev/installer/storage:v1.13.9"}
			c.Classes["gpu-cp"] = inventory.Class{Name: "gpu-cp", Type: inventory.ControlPlane, InstallerImage: "factory.talos.dev/installer/gpu:v1.13.9"}
			if tc.machineType == "worker" {
				c.Bundle = workerBundle(t) // a worker needs no CA key
			}
			dev := attested(worker(1, "node-01"))
			dev.Class = tc.class
			cfg := renderOf(t, c, dev, tc.sans)
			if err := Check(cfg, dev, testToken, tc.image); err != nil {
				t.Fatal(err)
			}
			raw := cfg.RawV1Alpha1()
			if raw.MachineConfig.MachineType != tc.machineType {
				t.Errorf("machine.type = %q", raw.MachineConfig.MachineType)
			}
			if cps := inventory.ControlPlanes([]inventory.Device{dev}, c.Classes); (len(cps) == 1) != (tc.machineType == "controlplane") {
				t.Errorf("ControlPlanes of a %s device = %v", tc.class, cps)
			}
			inst := raw.MachineConfig.MachineInstall
			if inst.InstallDisk != "" || inst.InstallDiskSelector.Serial != "DISK-node-01" || inst.InstallImage != tc.image {
				t.Errorf("machine.install = disk %q, selector %+v, image %q", inst.InstallDisk, inst.InstallDiskSelector, inst.InstallImage)
			}
			if raw.ClusterConfig.BootstrapToken != testToken {
				t.Errorf("cluster.token = %q", raw.ClusterConfig.BootstrapToken)
			}
			for _, want := range tc.sans {
				if !slices.Contains(raw.ClusterConfig.APIServerConfig.CertSANs, want) || !slices.Contains(raw.MachineConfig.MachineCertSANs, want) {
					t.Errorf("SAN %s missing: apiserver %v machine %v", want, raw.ClusterConfig.APIServerConfig.CertSANs, raw.MachineConfig.MachineCertSANs)
				}
			}
			aliases := cfg.NetworkLinkAliasConfigs()
			if len(aliases) != 1 || aliases[0].Name() != LinkName || !strings.Contains(aliases[0].LinkSelector().String(), `mac(link.permanent_addr) == "02:00:00:00:00:01"`) {
				t.Errorf("link aliases = %+v", aliases)
			}
			var addrs []netip.Prefix
			for _, l := range cfg.NetworkCommonLinkConfigs() {
				for _, a := range l.Addresses() {
					addrs = append(addrs, a.Address())
				}
				for _, r := range l.Routes() {
					if gw, _ := r.Gateway().Get(); gw != netip.MustParseAddr("10.0.0.1") {
						t.Errorf("route gateway = %v", gw)
					}
				}
			}
			if len(addrs) != 1 || addrs[0] != netip.MustParsePrefix("10.0.0.21/24") {
				t.Errorf("static addresses = %v", addrs)
			}
			if h := cfg.NetworkHostnameConfig(); h == nil || h.Hostname() != "node-01" {
				t.Errorf("hostname = %v", h)
			}
		})
	}
}

// Render refuses what it cannot render safely, before anything else.
func TestRenderRefuses(t *testing.T) {
	good := attested(worker(1, "node-01"))
	for _, tc := range []struct {
		name  string
		edit  func(*Cluster, *inventory.Device, *string)
		match error
	}{
		{"unknown class", func(_ *Cluster, d *inventory.Device, _ *string) { d.Class = "gpu" }, ErrClass},
		{"no installer image", func(c *Cluster, _ *inventory.Device, _ *string) { c.Classes = nil }, ErrClass},
		{"no install disk serial", func(_ *Cluster, d *inventory.Device, _ *string) { d.InstallDiskSerial = "" }, ErrLacks},
		{"no MAC", func(_ *Cluster, d *inventory.Device, _ *string) { d.MAC = nil }, ErrLacks},
		{"malformed token", func(_ *Cluster, _ *inventory.Device, tok *string) { *tok = "ABCDEF.0123456789abcdef" }, ErrInvalidConfig},
		{"address without prefix", func(_ *Cluster, d *inventory.Device, _ *string) { d.Address = netip.MustParsePrefix("10.0.0.21/32") }, ErrInvalidConfig},
		{"no address", func(_ *Cluster, d *inventory.Device, _ *string) { d.Address = netip.Prefix{} }, ErrInvalidConfig},
		{"control plane without CA keys", func(c *Cluster, d *inventory.Device, _ *string) {
			d.Class = ClassControlPlane
			c.Bundle = workerBundle(t)
		}, ErrNoBundleKeys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dev, tok := testCluster(t), good, testToken
			tc.edit(&c, &dev, &tok)
			if _, err := c.Render(dev, tok, nil); !errors.Is(err, tc.match) {
				t.Errorf("Render error = %v, want %v", err, tc.match)
			}
		})
	}
}

// Check refuses what machinery's validation accepts: a malformed
// cluster.token, an empty installer image, disk and selector both set, an
// address without its prefix.
func TestCheckCatchesWhatMachineryAccepts(t *testing.T) {
	c := testCluster(t)
	dev := attested(worker(1, "node-01"))
	image := c.Classes[ClassWorker].InstallerImage
	base := renderOf(t, c, dev, nil)
	patch := func(f func(*v1alpha1.Config)) coreconfig.Provider {
		p, err := base.PatchV1Alpha1(func(v *v1alpha1.Config) error { f(v); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	noPrefix := func() coreconfig.Provider {
		out := base.Documents()
		for i, d := range out {
			if l, ok := d.(*network.LinkConfigV1Alpha1); ok {
				l = l.DeepCopy()
				l.LinkAddresses = []network.AddressConfig{{AddressAddress: netip.MustParsePrefix("10.0.0.21/32")}}
				out[i] = l
			}
		}
		p, err := container.New(out...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		cfg   coreconfig.Provider
		token string
		image string
	}{
		{"malformed token", patch(func(v *v1alpha1.Config) { v.ClusterConfig.BootstrapToken = "not-a-token" }), "not-a-token", image},
		{"another token", base, "zzzzzz.0123456789abcdef", image},
		{"empty installer image", patch(func(v *v1alpha1.Config) { v.MachineConfig.MachineInstall.InstallImage = "" }), testToken, ""},
		{"disk and selector", patch(func(v *v1alpha1.Config) { v.MachineConfig.MachineInstall.InstallDisk = "/dev/sda" }), testToken, image},
		{"selector of another disk", patch(func(v *v1alpha1.Config) { v.MachineConfig.MachineInstall.InstallDiskSelector.Serial = "OTHER" }), testToken, image},
		{"address without prefix", noPrefix(), testToken, image},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// machinery accepts it (as DESIGN.md records for v1.13.9)...
			if _, err := tc.cfg.Validate(metalMode{}); err != nil {
				t.Errorf("machinery now refuses it: %v", err)
			}
			// ...fleet does not.
			if err := Check(tc.cfg, dev, tc.token, tc.image); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Check = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// The class inputs of the next control plane (inventory.RenderClassInputs)
// apply, as the Talos root applies them, as a patch to a control plane's
// rendered config.
func TestClassInputsPatchRenderedConfig(t *testing.T) {
	cp1 := worker(2, "cp-b")
	cp1.Class, cp1.Status = ClassControlPlane, inventory.StatusPlanned
	cp2 := worker(1, "cp-a")
	cp2.Class, cp2.Status = ClassControlPlane, inventory.StatusActive
	w := worker(3, "node-03")
	got, err := inventory.RenderClassInputs([]inventory.Device{cp1, w, cp2}, testClasses("", ""), []string{"api.folly.example", "10.0.0.10"})
	if err != nil {
		t.Fatal(err)
	}
	patch, err := configpatcher.LoadPatch(got)
	if err != nil {
		t.Fatal(err)
	}
	dev := attested(worker(4, "cp-c"))
	dev.Class = ClassControlPlane
	base := renderOf(t, testCluster(t), dev, nil)
	out, err := configpatcher.Apply(configpatcher.WithConfig(base), []configpatcher.Patch{patch})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := out.Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, san := range []string{"10.0.0.21", "10.0.0.22", "api.folly.example"} {
		if !slices.Contains(cfg.RawV1Alpha1().ClusterConfig.APIServerConfig.CertSANs, san) {
			t.Errorf("patched API server SANs %v lack %s", cfg.RawV1Alpha1().ClusterConfig.APIServerConfig.CertSANs, san)
		}
	}
}

// Kubernetes, Talos and Tinkerbell code stays out of every package but
// provision.
func TestDepsOtherPackages(t *testing.T) {
	banned := []string{"k8s.io", "sigs.k8s.io", "github.com/siderolabs", "github.com/tinkerbell"}
	for _, pkg := range []string{"attest", "lldpwait", "disksafe", "configserve", "inventory"} {
		path := "github.com/fleetkit/fleet/" + pkg
		t.Run(pkg, func(t *testing.T) {
			if out, err := exec.Command("go", "list", path).CombinedOutput(); err != nil {
				t.Fatalf("package %s does not build or does not exist: %v\n%s", path, err, out)
			}
			deptest.Check(t, path, banned)
		})
	}
}
