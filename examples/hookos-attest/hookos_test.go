package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/examples/templates"
)

// linuxkit is the part of LinuxKit's image definition that
// examples/hookos/hookos-attest.yaml sets.
type linuxkit struct {
	Onboot []struct {
		Name         string   `yaml:"name"`
		Image        string   `yaml:"image"`
		Command      []string `yaml:"command"`
		Env          []string `yaml:"env"`
		Net          string   `yaml:"net"`
		Capabilities []string `yaml:"capabilities"`
		Binds        []string `yaml:"binds"`
		Runtime      struct {
			Mkdir []string `yaml:"mkdir"`
		} `yaml:"runtime"`
	} `yaml:"onboot"`
	Files []lkFile `yaml:"files"`
}

// lkFile is a file LinuxKit adds to the image.
type lkFile struct {
	Path     string `yaml:"path"`
	Mode     string `yaml:"mode"`
	Contents string `yaml:"contents"`
}

// The HookOS snippet runs this agent as ko builds it, with flags and an
// environment it accepts, records the boot where the Templates' actions
// read it, and binds what the agent needs.
func TestHookOSSnippet(t *testing.T) {
	b, err := os.ReadFile("../hookos/hookos-attest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var lk linuxkit
	if err := dec.Decode(&lk); err != nil {
		t.Fatalf("examples/hookos/hookos-attest.yaml: %v", err)
	}
	if len(lk.Onboot) != 1 || lk.Onboot[0].Name != "hookos-attest" {
		t.Fatalf("the snippet's onboot containers: %+v, want hookos-attest alone", lk.Onboot)
	}
	c := lk.Onboot[0]
	if want := "ghcr.io/fleetkit/fleet/hookos-attest:" + templates.Release; c.Image != want {
		t.Errorf("image %q, want the released %q", c.Image, want)
	}
	// ko puts the binary at /ko-app/<name> (.ko.yaml).
	if len(c.Command) == 0 || c.Command[0] != "/ko-app/hookos-attest" {
		t.Fatalf("command %q does not run /ko-app/hookos-attest", c.Command)
	}
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Errorf("env %q is not NAME=VALUE", kv)
		}
		env[k] = v
	}
	var stderr bytes.Buffer
	s, code, ok := parse(c.Command[1:], func(k string) string { return env[k] }, &stderr)
	if !ok {
		t.Fatalf("the agent refuses the snippet's command %q: exit %d, %s", c.Command, code, stderr.String())
	}
	// The record goes where the Templates' actions read it.
	if s.bootDir != disksafe.DefaultBootDir {
		t.Errorf("the agent records the boot in %s; the actions read %s", s.bootDir, disksafe.DefaultBootDir)
	}
	for name, data := range map[string][]byte{templates.ProvisionName: templates.ProvisionYAML(), templates.RetireName: templates.RetireYAML()} {
		if !bytes.Contains(data, []byte("FLEET_BOOT_DIR: "+s.bootDir+"\n")) || !bytes.Contains(data, []byte("- "+s.bootDir+":"+s.bootDir+":ro\n")) {
			t.Errorf("%s's actions do not read and mount %s, where the agent records the boot", name, s.bootDir)
		}
	}
	if s.lldpWait != defaultLLDPWait {
		t.Errorf("-lldp-wait %v, the runbook's %v", s.lldpWait, defaultLLDPWait)
	}
	if s.url != "https://fleetd.example:8443/attest" {
		t.Errorf("-url %q, want FLEET_PUBLIC_URL/attest as examples/deploy's ConfigMap sets it", s.url)
	}
	// What the agent needs of HookOS.
	if c.Net != "host" {
		t.Errorf("net %q: the agent needs the host's network (the boot interface, LLDP)", c.Net)
	}
	if !slices.Contains(c.Capabilities, "all") {
		t.Errorf("capabilities %q, want all", c.Capabilities)
	}
	for _, bind := range []string{"/dev:/dev", "/sys:/sys", s.bootDir + ":" + s.bootDir, s.ca + ":" + s.ca + ":ro"} {
		if !slices.Contains(c.Binds, bind) {
			t.Errorf("binds %q lack %s", c.Binds, bind)
		}
	}
	if !slices.Contains(c.Runtime.Mkdir, s.bootDir) {
		t.Errorf("runtime.mkdir %q lacks %s, the host directory of the record", c.Runtime.Mkdir, s.bootDir)
	}
	if !slices.ContainsFunc(lk.Files, func(f lkFile) bool {
		return "/"+f.Path == s.ca && strings.Contains(f.Contents, "BEGIN CERTIFICATE")
	}) {
		t.Errorf("the snippet's files hold no CA at %s (-ca)", s.ca)
	}
}
