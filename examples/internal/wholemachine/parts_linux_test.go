package wholemachine

import (
	"strings"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/internal/dockertest"
	"github.com/fleetkit/fleet/internal/imagetest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// The registries the fleet-provision Template names its images in: the
// one fleetd's image settings name for fleet's actions, and waitdaemon's
// (the released default of FLEET_IMAGE_REBOOT). The machine's dockerd
// resolves both to the test's registry.
const (
	actionRegistry     = "registry.example"
	waitdaemonRegistry = "ghcr.io"
)

// actionImage is the image of fleet's action name as fleetd's settings
// name it: imagetest.Action's fleet/<name>:v1, in actionRegistry.
func actionImage(name string) string { return actionRegistry + "/fleet/" + name + ":v1" }

// images are the images the machine pulls: fleet's actions and the
// stand-ins for Talos's installer and for waitdaemon, in one registry on
// the test's loopback.
type images struct {
	reg                      *imagetest.Registry
	installer, slowInstaller string // as the registry names them
}

// repos are the repositories of the images the machine pulls.
var repos = []string{"fleet/wipe-disk", "fleet/install", "fleet/next-boot", imagetest.InstallerRepo, imagetest.WaitDaemonRepo}

// buildImages builds the images from this repository and pushes them. The
// wipe-disk image sets FLEET_LOOP_DEVICES=true in its environment (the
// Template's is added to it): this machine's disks are loop devices, which
// fleet's released wipe-disk image never counts as disks.
func buildImages(t *testing.T) images {
	t.Helper()
	reg := imagetest.StartRegistry(t)
	docker := testenv.Command(t, "docker", "docker.io")
	imagetest.Build(t, reg, "examples/wipe-disk", "fleet/wipe-disk", &imagetest.Config{
		Programs: []string{docker},
		Env:      []string{"FLEET_LOOP_DEVICES=true"},
	})
	imagetest.Action(t, reg, "install")
	imagetest.Action(t, reg, "next-boot")
	imagetest.WaitDaemon(t, reg)
	return images{
		reg:           reg,
		installer:     imagetest.Installer(t, reg),
		slowInstaller: imagetest.SlowInstaller(t, reg),
	}
}

// pulls returns how many times the registry served each image's manifest,
// by repository.
func (im images) pulls() map[string]int {
	out := map[string]int{}
	for _, repo := range repos {
		out[repo] = im.reg.Pulls(repo)
	}
	return out
}

// Waits on the real parts are sized by their progress, on two shared and
// loaded cores: a Workflow may take as long as it keeps moving (a state, an
// action or an action's state changes), and fails the test only when it
// stands still for stall, or runs past runLimit in all.
const (
	stall    = 3 * time.Minute
	runLimit = 20 * time.Minute
)

// actions returns the Workflow's actions, from its one task.
func actions(t *testing.T, wf tinkerbell.Workflow) []tinkerbell.Action {
	t.Helper()
	if len(wf.Status.Tasks) != 1 {
		t.Fatalf("Workflow %s has %d tasks, want one: %+v", wf.Name, len(wf.Status.Tasks), wf.Status.Tasks)
	}
	return wf.Status.Tasks[0].Actions
}

// printed returns the lines action a's container printed, stdout and
// stderr alike, as the machine's dockerd recorded them, once they hold a
// line equal to want, or, when match is not nil, one it accepts (want
// then describes it), waiting, for its log driver, as long as dockerd's
// record grows (dockertest.Docker.Printed); or fails t.
func printed(t *testing.T, d *dockertest.Docker, a tinkerbell.Action, want string, match func(string) bool) []string {
	t.Helper()
	if match == nil {
		match = func(l string) bool { return l == want }
	}
	lines, ok := d.Printed("tinkerbell_"+a.Name+"_"+a.ID, 30*time.Second, match)
	if !ok {
		t.Errorf("action %s printed no line %q; it printed:\n%s", a.Name, want, indent(strings.Join(lines, "\n")))
	}
	return lines
}
