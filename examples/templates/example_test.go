package templates_test

import (
	"fmt"

	"github.com/fleetkit/fleet/examples/templates"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
)

// fleetd creates both Templates in the namespace of its Workflows.
func ExampleProvision() {
	for _, t := range []*tinkerbell.Template{templates.Provision(), templates.Retire()} {
		t.Namespace = "tinkerbell"
		fmt.Println(t.Kind, t.Namespace+"/"+t.Name)
	}
	// Output:
	// Template tinkerbell/fleet-provision
	// Template tinkerbell/fleet-retire
}
