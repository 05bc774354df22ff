package templates

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The Templates as files, for kubectl apply.
var (
	//go:embed fleet-provision.yaml
	provisionYAML []byte
	//go:embed fleet-retire.yaml
	retireYAML []byte
)

// The names of the Templates: the defaults of provision.Config's
// ProvisionTemplate and RetireTemplate.
const (
	ProvisionName = "fleet-provision"
	RetireName    = "fleet-retire"
)

var (
	provisionTemplate = sync.OnceValues(func() (*tinkerbell.Template, error) { return decode(provisionYAML) })
	retireTemplate    = sync.OnceValues(func() (*tinkerbell.Template, error) { return decode(retireYAML) })
)

// Provision returns the Template of a provision run, fleet-provision,
// without a namespace: set the one of the Workflows before creating it.
// Each call returns a new Template, which the caller may change.
func Provision() *tinkerbell.Template { return must(provisionTemplate()) }

// Retire returns the Template of a retirement run, fleet-retire, as
// Provision does.
func Retire() *tinkerbell.Template { return must(retireTemplate()) }

// ProvisionYAML returns fleet-provision.yaml, the Template as a Kubernetes
// object in YAML.
func ProvisionYAML() []byte { return bytes.Clone(provisionYAML) }

// RetireYAML returns fleet-retire.yaml.
func RetireYAML() []byte { return bytes.Clone(retireYAML) }

func decode(b []byte) (*tinkerbell.Template, error) {
	var t tinkerbell.Template
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&t); err != nil {
		return nil, err
	}
	if t.Spec.Data == nil || *t.Spec.Data == "" {
		return nil, fmt.Errorf("template %s holds no data", t.Name)
	}
	return &t, nil
}

// must returns a copy of t. The files are part of the package and its
// tests decode them, so an error is a broken build, not input.
func must(t *tinkerbell.Template, err error) *tinkerbell.Template {
	if err != nil {
		panic("templates: an embedded Template does not decode: " + err.Error())
	}
	return t.DeepCopy()
}
