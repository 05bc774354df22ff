package daemon

import (
	"maps"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/examples/templates"
)

func baseSettings() map[string]string {
	return map[string]string{
		"FLEET_TLS_CERT": "c.pem", "FLEET_TLS_KEY": "k.pem", "FLEET_PUBLIC_URL": "https://fleetd.example:8443",
		"FLEET_SECRETS_BUNDLE": "secrets.yaml", "FLEET_NODES": "nodes.yaml",
		"NETBOX_URL": "https://netbox.example", "NETBOX_TOKEN": "t",
	}
}

// The action images and the BMC Secret: unset, the released images and
// bmc-auth; set, the settings' values; not a reference or a name, refused.
func TestReadSettingsImagesAndBMCSecret(t *testing.T) {
	s, err := readSettings(env(baseSettings()))
	if err != nil {
		t.Fatal(err)
	}
	if s.Images != (templates.Images{}) || s.BMCSecret != "bmc-auth" {
		t.Errorf("defaults: images %+v, BMC Secret %q", s.Images, s.BMCSecret)
	}
	m := baseSettings()
	maps.Copy(m, map[string]string{
		"FLEET_IMAGE_WIPE_DISK": "registry.lab:5000/fleet/wipe-disk:v2",
		"FLEET_IMAGE_INSTALL":   "registry.lab:5000/fleet/install:v2",
		"FLEET_IMAGE_NEXT_BOOT": "registry.lab:5000/fleet/next-boot:v2",
		"FLEET_IMAGE_REBOOT":    "registry.lab:5000/waitdaemon:0.2.0",
		"FLEET_BMC_SECRET":      "bmc-lab",
	})
	s, err = readSettings(env(m))
	if err != nil {
		t.Fatal(err)
	}
	want := templates.Images{
		WipeDisk: m["FLEET_IMAGE_WIPE_DISK"], Install: m["FLEET_IMAGE_INSTALL"],
		NextBoot: m["FLEET_IMAGE_NEXT_BOOT"], Reboot: m["FLEET_IMAGE_REBOOT"],
	}
	if s.Images != want || s.BMCSecret != "bmc-lab" {
		t.Errorf("images %+v, BMC Secret %q", s.Images, s.BMCSecret)
	}
	m = baseSettings()
	maps.Copy(m, map[string]string{
		"FLEET_IMAGE_WIPE_DISK": "wipe disk",
		"FLEET_IMAGE_INSTALL":   "registry.lab/{{ .install_disk }}:v1",
		"FLEET_BMC_SECRET":      "BMC_Auth",
	})
	_, err = readSettings(env(m))
	for _, want := range []string{
		`FLEET_IMAGE_WIPE_DISK="wipe disk" is not an image reference`,
		`FLEET_IMAGE_INSTALL="registry.lab/{{ .install_disk }}:v1" is not an image reference`,
		`FLEET_BMC_SECRET="BMC_Auth" is not the name of a Secret`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
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
