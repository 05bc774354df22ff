package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/examples/templates"
)

// mine are images of an operator's registry, as the settings name them.
var mine = templates.Images{
	WipeDisk: "registry.example/fleet/wipe-disk:v2",
	Install:  "registry.example/fleet/install:v2",
	NextBoot: "registry.example/fleet/next-boot:v2",
	Reboot:   "registry.example/waitdaemon:0.2.0",
}

func templateClient(objs ...runtime.Object) *dynfake.FakeDynamicClient {
	return dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{TemplateResource: "TemplateList"}, objs...)
}

// existing returns a Template as it is in a cluster, made with im.
func existing(t *testing.T, build func(*templates.Images) (*tinkerbell.Template, error), im templates.Images) *unstructured.Unstructured {
	t.Helper()
	tpl, err := build(&im)
	if err != nil {
		t.Fatal(err)
	}
	tpl.Namespace = "tinkerbell"
	tpl.ResourceVersion = "7"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tpl)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// wantWrites fails t unless the fake's writes, "verb name" each, are want.
func wantWrites(t *testing.T, c *dynfake.FakeDynamicClient, want ...string) {
	t.Helper()
	var got []string
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "create", "update":
			got = append(got, a.GetVerb()+" "+a.(interface{ GetObject() runtime.Object }).GetObject().(*unstructured.Unstructured).GetName())
		case "patch", "delete":
			got = append(got, a.GetVerb()+" "+a.(interface{ GetName() string }).GetName())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
}

// wantTemplates fails t unless the whole spec of each Template in the
// fake is fleet's Template made with im (whose actions run im's images:
// the templates package's TestImages).
func wantTemplates(t *testing.T, c *dynfake.FakeDynamicClient, im templates.Images) {
	t.Helper()
	for name, build := range map[string]func(*templates.Images) (*tinkerbell.Template, error){
		templates.ProvisionName: templates.ProvisionWith, templates.RetireName: templates.RetireWith,
	} {
		u, err := c.Resource(TemplateResource).Namespace("tinkerbell").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := u.Object["spec"], existing(t, build, im).Object["spec"]; !reflect.DeepEqual(got, want) {
			t.Errorf("with %+v, %s's spec:\n%v\nwant\n%v", im, name, got, want)
		}
	}
}

// ensure runs ensureTemplates on the fake with im, and returns its log.
func ensure(t *testing.T, c *dynfake.FakeDynamicClient, im templates.Images) string {
	t.Helper()
	var log bytes.Buffer
	if err := ensureTemplates(t.Context(), c, "tinkerbell", im, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
	return log.String()
}

// Missing Templates are created with the settings' images, or the
// released ones when the settings name none.
func TestEnsureTemplatesCreates(t *testing.T) {
	for _, im := range []templates.Images{{}, mine, {Install: mine.Install}} {
		c := templateClient()
		log := ensure(t, c, im)
		wantTemplates(t, c, im)
		wantWrites(t, c, "create fleet-provision", "create fleet-retire")
		for _, name := range []string{templates.ProvisionName, templates.RetireName} {
			if !strings.Contains(log, `level=INFO msg="fleetd: created Template" namespace=tinkerbell template=`+name+" images=") {
				t.Errorf("no line of log for %s:\n%s", name, log)
			}
		}
	}
}

// A Template whose images differ from the settings' is updated to fleet's
// Template with them, with a line of log naming it and both images.
func TestEnsureTemplatesUpdates(t *testing.T) {
	c := templateClient(existing(t, templates.ProvisionWith, templates.Images{}), existing(t, templates.RetireWith, templates.Images{}))
	log := ensure(t, c, mine)
	wantTemplates(t, c, mine)
	wantWrites(t, c, "update fleet-provision", "update fleet-retire")
	for _, want := range []string{
		`level=INFO msg="fleetd: updated Template to the images of its settings" namespace=tinkerbell template=fleet-provision ` +
			`old_images="install=` + templates.DefaultImages.Install + ` next-boot=` + templates.DefaultImages.NextBoot +
			` reboot=` + templates.DefaultImages.Reboot + ` wipe-disk=` + templates.DefaultImages.WipeDisk + `" ` +
			`new_images="install=` + mine.Install + ` next-boot=` + mine.NextBoot + ` reboot=` + mine.Reboot + ` wipe-disk=` + mine.WipeDisk + `"`,
		`template=fleet-retire old_images="wipe-disk=` + templates.DefaultImages.WipeDisk + `" new_images="wipe-disk=` + mine.WipeDisk + `"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
}

// A Template that runs the settings' images is left unwritten, whatever
// else an operator changed in it.
func TestEnsureTemplatesUntouched(t *testing.T) {
	provisionT := existing(t, templates.ProvisionWith, mine)
	data, _, _ := unstructured.NestedString(provisionT.Object, "spec", "data")
	if err := unstructured.SetNestedField(provisionT.Object, strings.Replace(data, "global_timeout: 3600", "global_timeout: 7200", 1), "spec", "data"); err != nil {
		t.Fatal(err)
	}
	c := templateClient(provisionT, existing(t, templates.RetireWith, mine))
	if log := ensure(t, c, mine); log != "" {
		t.Errorf("log:\n%s", log)
	}
	wantWrites(t, c)
}

// A replica that updates a Template another replica just wrote reads it
// again, and writes only while it still differs.
func TestEnsureTemplatesConflict(t *testing.T) {
	c := templateClient(existing(t, templates.ProvisionWith, templates.Images{}), existing(t, templates.RetireWith, mine))
	conflicts := 0
	c.PrependReactor("update", "templates", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		// Another replica wrote the settings' images meanwhile.
		other := existing(t, templates.ProvisionWith, mine)
		other.SetResourceVersion("8")
		if err := c.Tracker().Update(TemplateResource, other, "tinkerbell"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(TemplateResource.GroupResource(), templates.ProvisionName, errors.New("the object has been modified"))
	})
	if log := ensure(t, c, mine); log != "" {
		t.Errorf("log:\n%s", log)
	}
	wantTemplates(t, c, mine)
	// The one update that met the conflict.
	wantWrites(t, c, "update fleet-provision")
}
