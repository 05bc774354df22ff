package provision

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/inventory"
)

// A node can have its config while NetBox still shows its device planned:
// a fleetd (a replica) served the config, the node's kernel acknowledged
// it, and the fleetd stopped (killed, its host lost) before NetBox took the
// device active and its served line. No later fetch comes: the node boots
// its install and joins the cluster. The loop finds such a device: planned,
// its last run (a provision) ended SUCCESS at least registeredAfter ago,
// and a Node of its name registered in the cluster after that run started.
// It then takes the device active and journals why. A device is looked at
// once every registeredAfter.
const registeredAfter = time.Minute

// registeredText is the journal line of a device the loop found
// registered: <node>, <run>.
const registeredText = "%s registered in the cluster while NetBox showed it planned: a fleetd served the config of %s and stopped before it took the device active; the device is active"

// mayBeRegistered reports whether the pass should look for dev's Node:
// dev is planned, its newest run is its last run, a provision that ended
// SUCCESS, first seen so at least registeredAfter ago, and it was not
// looked at within registeredAfter.
func (p *Provisioner) mayBeRegistered(dev *inventory.Device, runs []*run, now time.Time) bool {
	if dev.Status != inventory.StatusPlanned || len(runs) == 0 {
		return false
	}
	r := runs[0]
	if r.Name() != dev.LastRun || kindOf(r) != RunProvision || r.Reported() != "SUCCESS" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seen, ok := p.succeeded[r.Name()]
	if !ok {
		p.succeeded[r.Name()] = succeededRun{seen: now}
		return false
	}
	return now.Sub(seen.seen) >= registeredAfter && now.Sub(seen.looked) >= registeredAfter
}

// succeededRun is what the loop knows of a planned device's run that
// ended SUCCESS: when it first saw it so, and when it last looked for the
// node.
type succeededRun struct {
	seen, looked time.Time
}

// registered looks for the Node of dev, whose last run r ended SUCCESS
// while dev stayed planned; a Node registered after r started takes dev
// active, with the journal line registeredText.
func (p *Provisioner) registered(ctx context.Context, dev *inventory.Device, r *run, now time.Time) error {
	p.mu.Lock()
	s := p.succeeded[r.Name()]
	s.looked = now
	p.succeeded[r.Name()] = s
	p.mu.Unlock()
	node, err := p.kube.CoreV1().Nodes().Get(ctx, dev.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read the Node of %s: %w", dev.Name, err)
	case node.CreationTimestamp.Time.Before(r.Created()):
		return nil // a Node of an earlier install
	}
	if err := p.nb.SetStatus(ctx, dev.ID, inventory.StatusActive); err != nil {
		return err
	}
	dev.Status = inventory.StatusActive
	p.log.Info("fleet.loop", "node", dev.Name, "run", r.Name(), "registered", node.CreationTimestamp.UTC().Format(time.RFC3339))
	return p.nb.Journal(ctx, dev.ID, inventory.JournalSuccess, fmt.Sprintf(registeredText, dev.Name, r.Name()))
}

// pruneSucceeded forgets the runs the listing does not hold.
func (p *Provisioner) pruneSucceeded(runs []*run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.succeeded) == 0 {
		return
	}
	listed := make(map[string]bool, len(runs))
	for _, r := range runs {
		listed[r.Name()] = true
	}
	for name := range p.succeeded {
		if !listed[name] {
			delete(p.succeeded, name)
		}
	}
}
