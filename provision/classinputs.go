package provision

import (
	"context"
	"fmt"

	"github.com/fleetkit/fleet/inventory"
)

// ClassInputs renders the class inputs of the next control plane from the
// devices NetBox holds now and the cluster's ExtraSANs
// (inventory.RenderClassInputs, whose error errors.Is matches with
// inventory.ErrNoControlPlanes when no control plane holds an address).
func (p *Provisioner) ClassInputs(ctx context.Context) ([]byte, error) {
	devs, err := p.nb.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	return inventory.RenderClassInputs(devs, p.cluster.Classes, p.cluster.ExtraSANs)
}
