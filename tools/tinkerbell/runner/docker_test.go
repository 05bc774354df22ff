package main

import (
	"slices"
	"testing"
)

// parseRun takes the command fleet's install action runs, and refuses
// what the stand-in cannot do.
func TestParseRun(t *testing.T) {
	o, err := parseRun([]string{"--rm", "--pull", "never", "--privileged", "--network", "host", "--pid", "host",
		"--volume", "/dev:/dev", "--env", "INSTALLER_META_BASE64", "--entrypoint", "/bin/installer",
		"ghcr.io/siderolabs/installer:v1.13.9", "install", "--disk", "/dev/nvme0n1", "--platform", "metal"})
	if err != nil {
		t.Fatal(err)
	}
	if o.pull != "never" || o.entrypoint != "/bin/installer" || o.image != "ghcr.io/siderolabs/installer:v1.13.9" ||
		!slices.Equal(o.volumes, []string{"/dev:/dev"}) || !slices.Equal(o.env, []string{"INSTALLER_META_BASE64"}) ||
		!slices.Equal(o.args, []string{"install", "--disk", "/dev/nvme0n1", "--platform", "metal"}) {
		t.Errorf("parseRun: %+v", o)
	}
	for _, bad := range [][]string{
		{"--network", "bridge", "img"},
		{"--pull", "sometimes", "img"},
		{"--cap-add", "ALL", "img"},
		{"--rm"},
		{"--entrypoint"},
	} {
		if _, err := parseRun(bad); err == nil {
			t.Errorf("parseRun(%q) took it", bad)
		}
	}
}

func TestImageDir(t *testing.T) {
	if d, err := imageDir("/s", "ghcr.io/a/b:v1"); err != nil || d != "/s/ghcr.io/a/b:v1" {
		t.Errorf("imageDir = %q, %v", d, err)
	}
	for _, bad := range []string{"", "/etc", "a/../../etc"} {
		if _, err := imageDir("/s", bad); err == nil {
			t.Errorf("imageDir(%q) took it", bad)
		}
	}
}
