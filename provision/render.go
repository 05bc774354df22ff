package provision

import (
	"fmt"
	"net/netip"
	"regexp"

	"github.com/siderolabs/talos/pkg/machinery/cel"
	"github.com/siderolabs/talos/pkg/machinery/cel/celenv"
	coreconfig "github.com/siderolabs/talos/pkg/machinery/config"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/container"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/types/network"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/constants"

	"github.com/fleetkit/fleet/inventory"
)

// controlPlane reports whether dev's class is a control plane class.
func (c Cluster) controlPlane(dev inventory.Device) bool {
	cl, ok := c.Classes[dev.Class]
	return ok && cl.Type == inventory.ControlPlane
}

// LinkName is the name of the link alias a rendered config gives the
// node's Kubernetes interface (matched by its MAC).
const LinkName = "fleet0"

// tokenRE is the form of a Kubernetes bootstrap token.
var tokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// metalMode is the runtime mode fleet validates configs for: an installed
// bare-metal node.
type metalMode struct{}

func (metalMode) String() string        { return "metal" }
func (metalMode) RequiresInstall() bool { return true }
func (metalMode) InContainer() bool     { return false }

// Render renders dev's Talos machine config for its class: its static
// address on the interface with its MAC, its install disk by serial, the
// class's installer image, and token as cluster.token. For a control plane,
// sans (every control plane's address, see inventory.ControlPlaneSANs) become the API
// server's and the machine's certificate SANs, and the bundle must hold its
// CA keys. The config passed machinery's validation and fleet's own checks
// (a well-formed token, an installer image, the install disk by serial
// alone, an address with its prefix). The result holds secrets: never log
// it. Render does not call the network; it is safe for concurrent use.
//
// errors.Is finds ErrClass, ErrLacks, ErrNoBundleKeys or ErrInvalidConfig.
func (c Cluster) Render(dev inventory.Device, token string, sans []string) ([]byte, error) {
	typ, image, err := c.class(dev)
	if err != nil {
		return nil, err
	}
	if lacks := lacking(dev); len(lacks) > 0 {
		return nil, &LacksError{Node: dev.Name, Fields: lacks}
	}
	if err := checkAddress(dev.Address); err != nil {
		return nil, err
	}
	if !tokenRE.MatchString(token) {
		return nil, fmt.Errorf("%w: the bootstrap token is malformed", ErrInvalidConfig)
	}
	if typ == machine.TypeControlPlane && !bundleHasKeys(c.Bundle) {
		return nil, ErrNoBundleKeys
	}
	contract := coreconfig.TalosVersionCurrent
	if c.TalosVersion != "" {
		if contract, err = coreconfig.ParseContractFromVersion(c.TalosVersion); err != nil {
			return nil, fmt.Errorf("talos version %q: %w", c.TalosVersion, err)
		}
	}
	k8s := c.KubernetesVersion
	if k8s == "" {
		k8s = constants.DefaultKubernetesVersion
	}
	bundle := *c.Bundle
	s := *c.Bundle.Secrets
	s.BootstrapToken = token
	bundle.Secrets = &s
	opts := []generate.Option{
		generate.WithVersionContract(contract),
		generate.WithSecretsBundle(&bundle),
		generate.WithInstallImage(image),
	}
	if typ == machine.TypeControlPlane && len(sans) > 0 {
		opts = append(opts, generate.WithAdditionalSubjectAltNames(sans))
	}
	in, err := generate.NewInput(c.Name, c.Endpoint, k8s, opts...)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dev.Name, err)
	}
	prov, err := in.Config(typ)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dev.Name, err)
	}
	prov, err = prov.PatchV1Alpha1(func(v *v1alpha1.Config) error {
		v.MachineConfig.MachineInstall.InstallDisk = ""
		v.MachineConfig.MachineInstall.InstallDiskSelector = &v1alpha1.InstallDiskSelector{Serial: dev.InstallDiskSerial}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dev.Name, err)
	}
	docs, err := c.nodeDocuments(prov.Documents(), dev)
	if err != nil {
		return nil, err
	}
	out, err := container.New(docs...)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dev.Name, err)
	}
	if err := Check(out, dev, token, image); err != nil {
		return nil, err
	}
	b, err := out.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dev.Name, err)
	}
	return b, nil
}

// nodeDocuments replaces the generated hostname document with the node's
// name and adds its static address: a LinkAliasConfig named LinkName that
// matches the NetBox MAC by CEL (mac(link.permanent_addr) == "..."), and a
// LinkConfig LinkName with the address and a default route.
func (c Cluster) nodeDocuments(in []talosconfig.Document, dev inventory.Device) ([]talosconfig.Document, error) {
	docs := make([]talosconfig.Document, 0, len(in)+3)
	for _, d := range in {
		if d.Kind() == network.HostnameKind {
			continue
		}
		docs = append(docs, d)
	}
	host := network.NewHostnameConfigV1Alpha1()
	host.ConfigHostname = dev.Name

	match, err := cel.ParseBooleanExpression(fmt.Sprintf("mac(link.permanent_addr) == %q", dev.MAC.String()), celenv.LinkLocator())
	if err != nil {
		return nil, fmt.Errorf("render %s: link selector: %w", dev.Name, err)
	}
	alias := network.NewLinkAliasConfigV1Alpha1(LinkName)
	alias.Selector.Match = match

	gw := c.Gateway
	if !gw.IsValid() {
		gw = dev.Address.Masked().Addr().Next()
	}
	link := network.NewLinkConfigV1Alpha1(LinkName)
	link.LinkUp = new(true)
	link.LinkAddresses = []network.AddressConfig{{AddressAddress: dev.Address}}
	link.LinkRoutes = []network.RouteConfig{{RouteGateway: network.Addr{Addr: gw}}}
	return append(docs, host, alias, link), nil
}

// Check validates a rendered config for dev: machinery's own validation for
// an installed bare-metal node, then what machinery accepts but fleet does
// not: a cluster.token other than token or not a bootstrap token, an
// installer image other than image, an install disk named by path or not by
// dev's install_disk_serial, and a static address without its prefix or
// other than dev's. errors.Is finds ErrInvalidConfig.
func Check(cfg coreconfig.Provider, dev inventory.Device, token, image string) error {
	if _, err := cfg.Validate(metalMode{}); err != nil {
		return fmt.Errorf("%w for %s: %w", ErrInvalidConfig, dev.Name, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w for %s: %s", ErrInvalidConfig, dev.Name, fmt.Sprintf(format, args...))
	}
	raw := cfg.RawV1Alpha1()
	if raw == nil || raw.MachineConfig == nil || raw.ClusterConfig == nil {
		return bad("it has no machine or cluster section")
	}
	if t := raw.ClusterConfig.BootstrapToken; !tokenRE.MatchString(t) || t != token {
		return bad("cluster.token is not the node's bootstrap token")
	}
	inst := raw.MachineConfig.MachineInstall
	if inst == nil {
		return bad("it has no machine.install")
	}
	if inst.InstallImage == "" || inst.InstallImage != image {
		return bad("machine.install.image is %q, not the class's installer image %q", inst.InstallImage, image)
	}
	if inst.InstallDisk != "" {
		return bad("machine.install.disk is set; the install disk goes by its serial alone")
	}
	if inst.InstallDiskSelector == nil || inst.InstallDiskSelector.Serial == "" || inst.InstallDiskSelector.Serial != dev.InstallDiskSerial {
		return bad("machine.install.diskSelector.serial is not install_disk_serial %q", dev.InstallDiskSerial)
	}
	var found bool
	for _, l := range cfg.NetworkCommonLinkConfigs() {
		if l.Name() != LinkName {
			continue
		}
		for _, a := range l.Addresses() {
			p := a.Address()
			if err := checkAddress(p); err != nil {
				return bad("%v", err)
			}
			if p != dev.Address {
				return bad("the static address is %s, not %s", p, dev.Address)
			}
			found = true
		}
	}
	if !found {
		return bad("it holds no static address on %s", LinkName)
	}
	return nil
}

// checkAddress refuses an address without a usable prefix.
func checkAddress(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("%w: the device holds no address", ErrInvalidConfig)
	}
	if b := p.Bits(); b <= 0 || b >= p.Addr().BitLen() {
		return fmt.Errorf("%w: the address %s has no network prefix", ErrInvalidConfig, p)
	}
	return nil
}

func (c Cluster) class(dev inventory.Device) (machine.Type, string, error) {
	var typ machine.Type
	cl, ok := c.Classes[dev.Class]
	switch {
	case !ok:
		return 0, "", fmt.Errorf("%w: %s has class %q", ErrClass, dev.Name, dev.Class)
	case cl.Type == inventory.Worker:
		typ = machine.TypeWorker
	case cl.Type == inventory.ControlPlane:
		typ = machine.TypeControlPlane
	default:
		return 0, "", fmt.Errorf("%w: class %q of %s has machine type %q", ErrClass, dev.Class, dev.Name, cl.Type)
	}
	image := cl.InstallerImage
	if image == "" {
		return 0, "", fmt.Errorf("%w: class %q of %s has no installer image", ErrClass, dev.Class, dev.Name)
	}
	return typ, image, nil
}

// lacking lists the fields dev lacks for a run, in the runbook's order.
func lacking(dev inventory.Device) []string {
	var f []string
	if len(dev.MAC) == 0 {
		f = append(f, "MAC")
	}
	if dev.InstallDisk == "" {
		f = append(f, "install_disk")
	}
	if dev.InstallDiskSerial == "" {
		f = append(f, "install_disk_serial")
	}
	return f
}

// bundleHasKeys reports whether b holds the CA keys a control plane needs.
func bundleHasKeys(b *secrets.Bundle) bool {
	if b == nil || b.Certs == nil {
		return false
	}
	c := b.Certs
	ok := func(crt, key []byte) bool { return len(crt) > 0 && len(key) > 0 }
	return c.Etcd != nil && ok(c.Etcd.Crt, c.Etcd.Key) &&
		c.K8s != nil && ok(c.K8s.Crt, c.K8s.Key) &&
		c.K8sAggregator != nil && ok(c.K8sAggregator.Crt, c.K8sAggregator.Key) &&
		c.OS != nil && ok(c.OS.Crt, c.OS.Key) &&
		c.K8sServiceAccount != nil && len(c.K8sServiceAccount.Key) > 0
}
