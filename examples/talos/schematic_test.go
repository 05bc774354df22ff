// Package talos_test checks schematic.yaml, the Image Factory schematic of
// a fleet class's installer image, against the code that depends on it.
package talos_test

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/configserve"
)

// schematic is the part of the Image Factory's schematic format fleet
// sets.
type schematic struct {
	Customization struct {
		ExtraKernelArgs []string `yaml:"extraKernelArgs"`
	} `yaml:"customization"`
}

// publicURL is FLEET_PUBLIC_URL in examples/deploy's ConfigMap.
func publicURL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../deploy/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["FLEET_PUBLIC_URL"] == "" {
		t.Fatal("examples/deploy/configmap.yaml sets no FLEET_PUBLIC_URL")
	}
	return cm.Data["FLEET_PUBLIC_URL"]
}

// configArg returns the URL of the schematic's one talos.config= argument.
func configArg(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("schematic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	var s schematic
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("schematic.yaml: %v", err)
	}
	var urls []string
	for _, a := range s.Customization.ExtraKernelArgs {
		if v, ok := strings.CutPrefix(a, "talos.config="); ok {
			urls = append(urls, v)
		}
	}
	if len(urls) != 1 {
		t.Fatalf("schematic.yaml has %d talos.config= arguments, want 1: %q", len(urls), s.Customization.ExtraKernelArgs)
	}
	return urls[0]
}

// The kernel argument is fleetd's config URL: FLEET_PUBLIC_URL, then
// configserve's path, then ${code}, which Talos replaces with the code the
// install action writes to META; the install action documents the same
// argument. With the code in its place, the URL is one configserve serves
// the node's config at, once (configserve's TestServeOnceOverTLS).
func TestSchematicConfigURL(t *testing.T) {
	arg := configArg(t)
	if want := publicURL(t) + configserve.PathPrefix + "${code}"; arg != want {
		t.Errorf("talos.config=%s, want FLEET_PUBLIC_URL%s${code}: %s", arg, configserve.PathPrefix, want)
	}
	u, err := url.Parse(strings.Replace(arg, "${code}", "x", 1))
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		t.Errorf("talos.config=%s is not an https URL: %v", arg, err)
	}
	install, err := os.ReadFile("../install/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(install), "//\ttalos.config="+arg+"\n") {
		t.Errorf("examples/install documents another talos.config= than the schematic's %s", arg)
	}
}
