package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// savedPlan is the file plan -out writes and apply FILE reads: what the
// plan was made from, and a digest of what it read of NetBox.
type savedPlan struct {
	FormatVersion int          `json:"format_version"`
	Kind          string       `json:"kind"` // savedPlanKind
	Settings      planSettings `json:"settings"`
	NetBoxURL     string       `json:"netbox_url"`
	NodesData     string       `json:"nodes"`    // the nodes file as planned
	TopologyData  string       `json:"topology"` // the topology as planned
	Digest        string       `json:"digest"`   // see netBoxDigest
	Plan          planJSON     `json:"plan"`     // the plan, as plan -o json prints it
}

const savedPlanKind = "fleetctl-plan"

// errStalePlan: NetBox changed since the saved plan was made.
var errStalePlan = errors.New("NetBox changed since the plan was made")

// netBoxDigest is a digest of what a plan read of NetBox: the plan's
// changes and unlisted devices, and, of every one of fleet's devices, the
// fields the plan compares with the nodes file (name, serial, model,
// class, bmc, install disk and its serial, approved EK hashes, address
// and switch port). What fleetd records (MAC, attestation, status,
// desired_action, last_run) is left out: fleetd writes it at any time,
// and apply never touches it.
func netBoxDigest(ctx context.Context, nb *inventory.NetBox, nodesPath string, p *inventory.Plan) (string, error) {
	devs, err := nb.Devices(ctx)
	if err != nil {
		return "", err
	}
	type planned struct {
		ID                         int64
		Name, Serial, Model, Class string
		BMC, Disk, DiskSerial      string
		EKHash, EKHashECC, Address string
		SwitchPort                 int
	}
	read := make([]planned, len(devs))
	for i, d := range devs {
		read[i] = planned{d.ID, d.Name, d.Serial, d.Model, d.Class, d.BMC, d.InstallDisk, d.InstallDiskSerial,
			d.ApprovedEKHash, d.ApprovedEKHashECC, d.Address.String(), d.SwitchPort}
	}
	slices.SortFunc(read, func(a, b planned) int { return cmp.Compare(a.ID, b.ID) })
	plan := newPlanJSON(nodesPath, p)
	data, err := json.Marshal(struct {
		Changes  []changeJSON
		Unlisted []string
		Devices  []planned
	}{plan.Changes, plan.Unlisted, read})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// savePlan writes p, made from s against the NetBox at url, to path.
func (c *call) savePlan(ctx context.Context, nb *inventory.NetBox, path string, s planSettings, url string, p *inventory.Plan) int {
	nodes, err := os.ReadFile(s.Nodes)
	if err != nil {
		return c.fail(2, err)
	}
	topo, err := os.ReadFile(s.Topology)
	if err != nil {
		return c.fail(2, err)
	}
	digest, err := netBoxDigest(ctx, nb, s.Nodes, p)
	if err != nil {
		return c.failNetBox(err)
	}
	data, err := json.MarshalIndent(savedPlan{
		FormatVersion: jsonFormat, Kind: savedPlanKind, Settings: s, NetBoxURL: url,
		NodesData: string(nodes), TopologyData: string(topo), Digest: digest, Plan: newPlanJSON(s.Nodes, p),
	}, "", "  ")
	if err != nil {
		return c.fail(2, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return c.fail(2, err)
	}
	return 0
}

// applySaved applies the plan saved in path: it plans again from what the
// plan was made from, refuses when NetBox changed since (another digest),
// and otherwise writes the plan, which is then the saved one.
func (c *call) applySaved(path string, timeout time.Duration) int {
	url, token, err := netBoxEnv()
	if err != nil {
		return c.fail(2, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return c.fail(2, err)
	}
	var sp savedPlan
	if err := json.Unmarshal(data, &sp); err != nil || sp.Kind != savedPlanKind {
		return c.fail(2, fmt.Errorf("%s is not a plan fleetctl plan -out wrote", path))
	}
	if sp.FormatVersion != jsonFormat {
		return c.fail(2, fmt.Errorf("%s is a plan of format %d; this fleetctl reads format %d: run fleetctl plan -out again", path, sp.FormatVersion, jsonFormat))
	}
	if sp.NetBoxURL != url {
		return c.fail(1, fmt.Errorf("%s was planned against the NetBox at %s, and NETBOX_URL names %s; nothing was applied", path, sp.NetBoxURL, url))
	}
	s := sp.Settings
	topo, err := inventory.ParseTopology(s.Topology, []byte(sp.TopologyData))
	if err != nil {
		return c.fail(2, fmt.Errorf("%s: %w", path, err))
	}
	inv, err := inventory.Parse(s.Nodes, []byte(sp.NodesData), topo)
	if err != nil {
		return c.fail(2, fmt.Errorf("%s: %w", path, err))
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	nb, err := inventory.NewNetBox(url, token, s.netBoxConfig(timeout, logger))
	if err != nil {
		return c.fail(2, err)
	}
	ctx, stop := c.context()
	defer stop()
	p, err := nb.Plan(ctx, inv)
	switch {
	case errors.Is(err, inventory.ErrConflict):
		return c.fail(1, fmt.Errorf("%w: %v; nothing was applied: run fleetctl plan -out %s again", errStalePlan, err, path))
	case err != nil:
		return c.failNetBox(err)
	}
	digest, err := netBoxDigest(ctx, nb, s.Nodes, p)
	if err != nil {
		return c.failNetBox(err)
	}
	if digest != sp.Digest {
		return c.fail(1, fmt.Errorf("%w in %s (NetBox reads %s, the plan read %s); nothing was applied: run fleetctl plan -out %s again",
			errStalePlan, path, digest, sp.Digest, path))
	}
	fmt.Fprint(c.stdout, p)
	return c.apply(ctx, nb, url, p)
}
