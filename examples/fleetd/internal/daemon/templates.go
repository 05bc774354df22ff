package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

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

// ensureTemplates makes the Templates fleet's Workflows name in ns run
// the images of the settings: a missing Template is created with them,
// and one whose actions name other images is replaced by fleet's Template
// with the settings' images. One that names them is left unwritten. Each
// write is a line of log at INFO: a Template is no device, so it has no
// journal in NetBox, and fleetd's log is where its changes are told.
// Replicas that start together may each update a Template: a conflict is
// read again, and the Template is written only while it still differs.
func ensureTemplates(ctx context.Context, tink dynamic.Interface, ns string, images templates.Images, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, build := range []func(*templates.Images) (*tinkerbell.Template, error){templates.ProvisionWith, templates.RetireWith} {
		want, err := build(&images)
		if err != nil {
			return err
		}
		want.Namespace = ns
		if err := ensureTemplate(ctx, tink.Resource(TemplateResource).Namespace(ns), want, log); err != nil {
			return err
		}
	}
	return nil
}

func ensureTemplate(ctx context.Context, c dynamic.ResourceInterface, want *tinkerbell.Template, log *slog.Logger) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return err
	}
	wantImages := templates.ActionImages(want)
	for attempt := 0; ; attempt++ {
		u, err := c.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = c.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) && attempt < 3 {
				continue // another replica created it: compare its images
			}
			if err != nil {
				return fmt.Errorf("create Template %s/%s: %w", want.Namespace, want.Name, err)
			}
			log.Info("fleetd: created Template", "namespace", want.Namespace, "template", want.Name, "images", imagesAttr(wantImages))
			return nil
		}
		if err != nil {
			return fmt.Errorf("read Template %s/%s: %w", want.Namespace, want.Name, err)
		}
		var have tinkerbell.Template
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &have); err != nil {
			return fmt.Errorf("read Template %s/%s: %w", want.Namespace, want.Name, err)
		}
		haveImages := templates.ActionImages(&have)
		if maps.Equal(haveImages, wantImages) {
			return nil
		}
		u.Object["spec"] = obj["spec"]
		_, err = c.Update(ctx, u, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("update Template %s/%s, whose actions run %s, to run %s: %w", want.Namespace, want.Name, imagesAttr(haveImages), imagesAttr(wantImages), err)
		}
		log.Info("fleetd: updated Template to the images of its settings", "namespace", want.Namespace, "template", want.Name,
			"old_images", imagesAttr(haveImages), "new_images", imagesAttr(wantImages))
		return nil
	}
}

// imagesAttr writes images by action as action=image pairs, sorted by
// action and separated by spaces.
func imagesAttr(images map[string]string) string {
	var b strings.Builder
	for _, a := range slices.Sorted(maps.Keys(images)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a + "=" + images[a])
	}
	return b.String()
}
