package daemon

import (
	"strings"
	"testing"

	"github.com/fleetkit/fleet/examples/templates"
)

// The action images and the BMC Secret: unset, the released images and
// bmc-auth; set, the settings' values; not a reference or a name, refused.
func TestReadSettingsImagesAndBMCSecret(t *testing.T) {
	s, err := readWith(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Images != (templates.Images{}) || s.BMCSecret != "bmc-auth" {
		t.Errorf("defaults: images %+v, BMC Secret %q", s.Images, s.BMCSecret)
	}
	want := templates.Images{
		WipeDisk: "registry.lab:5000/fleet/wipe-disk:v2", Install: "registry.lab:5000/fleet/install:v2",
		NextBoot: "registry.lab:5000/fleet/next-boot:v2", Reboot: "registry.lab:5000/waitdaemon:0.2.0",
	}
	s, err = readWith(map[string]string{
		"FLEET_IMAGE_WIPE_DISK": want.WipeDisk, "FLEET_IMAGE_INSTALL": want.Install,
		"FLEET_IMAGE_NEXT_BOOT": want.NextBoot, "FLEET_IMAGE_REBOOT": want.Reboot,
		"FLEET_BMC_SECRET": "bmc-lab",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Images != want || s.BMCSecret != "bmc-lab" {
		t.Errorf("images %+v, BMC Secret %q", s.Images, s.BMCSecret)
	}
	_, err = readWith(map[string]string{
		"FLEET_IMAGE_WIPE_DISK": "wipe disk",
		"FLEET_IMAGE_INSTALL":   "registry.lab/{{ .install_disk }}:v1",
		"FLEET_BMC_SECRET":      "BMC_Auth",
	})
	wantErrs(t, err,
		`FLEET_IMAGE_WIPE_DISK="wipe disk" is not an image reference`,
		`FLEET_IMAGE_INSTALL="registry.lab/{{ .install_disk }}:v1" is not an image reference`,
		`FLEET_BMC_SECRET="BMC_Auth" is not the name of a Secret`)
}

// -help names each image setting with its released default.
func TestHelpNamesImageDefaults(t *testing.T) {
	im := templates.DefaultImages
	for name, def := range map[string]string{
		"FLEET_IMAGE_WIPE_DISK": im.WipeDisk, "FLEET_IMAGE_INSTALL": im.Install,
		"FLEET_IMAGE_NEXT_BOOT": im.NextBoot, "FLEET_IMAGE_REBOOT": im.Reboot,
		"FLEET_BMC_SECRET": "bmc-auth",
	} {
		i := strings.Index(envHelp, "\n  "+name+" ")
		if i < 0 {
			t.Errorf("-help does not document %s", name)
			continue
		}
		entry := envHelp[i+1:]
		if j := strings.Index(entry[2:], "\n  FLEET_"); j >= 0 {
			entry = entry[:j+2]
		}
		if !strings.Contains(entry, "(default "+def+")") && !strings.Contains(entry, "(default "+def+";") {
			t.Errorf("-help's %s does not name the default %s:\n%s", name, def, entry)
		}
	}
}
