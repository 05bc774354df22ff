package templates

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
)

// Each action runs the image given for it, rendered as Tinkerbell renders
// it; an action given none runs the released one; and nothing else of
// the Template changes. The files name the released images, and the
// Templates made with no images or with DefaultImages are the files'.
func TestImages(t *testing.T) {
	mine := &Images{
		WipeDisk: "registry.example:5000/fleet/wipe-disk:v9",
		Install:  "registry.example/fleet/install@sha256:" + strings.Repeat("ab", 32),
		NextBoot: "registry.example/fleet/next-boot:v9@sha256:" + strings.Repeat("cd", 32),
	}
	eachRun(t, func(t *testing.T, r tplRun) {
		// want is the images of r's actions, from im, each unset one the
		// released image.
		want := func(im *Images) map[string]string {
			var set Images
			if im != nil {
				set = *im
			}
			d := DefaultImages
			m := map[string]string{
				ActionWipeDisk: cmp.Or(set.WipeDisk, d.WipeDisk), ActionInstall: cmp.Or(set.Install, d.Install),
				ActionNextBoot: cmp.Or(set.NextBoot, d.NextBoot), ActionReboot: cmp.Or(set.Reboot, d.Reboot),
			}
			maps.DeleteFunc(m, func(a, _ string) bool { return !slices.Contains(r.actions, a) })
			return m
		}
		if got := ActionImages(r.tpl()); !maps.Equal(got, want(nil)) {
			t.Errorf("the file names the images %v, want the released %v", got, want(nil))
		}
		for _, im := range []*Images{nil, {}, &DefaultImages, mine} {
			tpl, err := r.with(im)
			if err != nil {
				t.Fatal(err)
			}
			wf := mustRender(t, *tpl.Spec.Data, values(mac, disk, serial, code, image))
			for _, a := range wf.Tasks[0].Actions {
				if a.Image != want(im)[a.Name] {
					t.Errorf("with %+v, %s runs %q, want %q", im, a.Name, a.Image, want(im)[a.Name])
				}
			}
			if got := ActionImages(tpl); !maps.Equal(got, want(im)) {
				t.Errorf("with %+v, ActionImages = %v, want %v", im, got, want(im))
			}
			if tpl.Name != r.name || (im != mine && *tpl.Spec.Data != r.data()) {
				t.Errorf("with %+v, the Template %s is not the file's:\n%s", im, tpl.Name, *tpl.Spec.Data)
			}
			// Only the image lines differ from the file.
			a, b := strings.Split(r.data(), "\n"), strings.Split(*tpl.Spec.Data, "\n")
			if len(a) != len(b) {
				t.Fatalf("%d lines, the file %d", len(b), len(a))
			}
			for i := range a {
				if a[i] != b[i] && !strings.HasPrefix(strings.TrimSpace(a[i]), "image: ") {
					t.Errorf("line %d is %q, the file's %q", i+1, b[i], a[i])
				}
			}
		}
	})
}

// An image that is no reference, or that would add YAML or a template
// action to the run, is refused with ErrImage.
func TestImageRefused(t *testing.T) {
	for _, ref := range []string{
		"wipe disk:v1",
		"registry.example/fleet/wipe-disk:v1\n            command: [sh]",
		"registry.example/fleet/{{ .install_disk }}:v1",
		`"registry.example/x:v1"`,
		"Registry.example/Fleet:v1",
		"registry.example/fleet/wipe-disk:",
		"registry.example/fleet/wipe-disk@sha256:abc",
	} {
		for _, r := range runs {
			if _, err := r.with(&Images{WipeDisk: ref}); !errors.Is(err, ErrImage) {
				t.Errorf("%s with wipe-disk %q: %v, want ErrImage", r.name, ref, err)
			}
		}
		if err := CheckImage(ref); !errors.Is(err, ErrImage) {
			t.Errorf("CheckImage(%q) = %v", ref, err)
		}
	}
	for _, ref := range []string{"alpine", "registry.example:5000/a/b_c.d-e:v1.2", "ghcr.io/fleetkit/fleet/install:v0.1.0"} {
		if err := CheckImage(ref); err != nil {
			t.Error(err)
		}
	}
}

// ActionImages reads what a Template in a cluster names, whoever wrote it.
func TestActionImages(t *testing.T) {
	data := "tasks:\n  - name: provision\n    worker: x\n    actions:\n      - name: wipe-disk\n        image: mine/wipe:1  \n      - name: install\n        image: \n"
	got := ActionImages(&tinkerbell.Template{Spec: tinkerbell.TemplateSpec{Data: &data}})
	if want := map[string]string{"wipe-disk": "mine/wipe:1", "install": ""}; !maps.Equal(got, want) {
		t.Errorf("ActionImages = %v, want %v", got, want)
	}
	if got := ActionImages(&tinkerbell.Template{}); len(got) != 0 {
		t.Errorf("no data: %v", got)
	}
}
