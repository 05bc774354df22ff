package daemon

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/examples/templates"
)

// TemplateResource is Tinkerbell's Template resource.
var TemplateResource = tinkerbell.GroupVersion.WithResource("templates")

// ensureTemplates creates the Templates fleet's Workflows name in ns when
// they are missing. A Template that exists is left as it is: an operator
// may have pointed its actions at their own registry.
func ensureTemplates(ctx context.Context, tink dynamic.Interface, ns string) (created []string, err error) {
	for _, t := range []*tinkerbell.Template{templates.Provision(), templates.Retire()} {
		t.Namespace = ns
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
		if err != nil {
			return created, err
		}
		_, err = tink.Resource(TemplateResource).Namespace(ns).Create(ctx, newUnstructured(obj), metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			return created, fmt.Errorf("create Template %s/%s: %w", ns, t.Name, err)
		default:
			created = append(created, t.Name)
		}
	}
	return created, nil
}

func newUnstructured(obj map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}
