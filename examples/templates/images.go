package templates

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
)

// Release is the tag of fleet's released action images, the one the
// Templates' files name.
const Release = "v0.1.0"

// The actions of the Templates, by the name each has in them.
const (
	ActionWipeDisk = "wipe-disk"
	ActionInstall  = "install"
	ActionNextBoot = "next-boot"
	ActionReboot   = "reboot"
)

// Images names the image of each action of the Templates. A zero field
// means that action's image in DefaultImages. An Images is a plain value:
// safe to copy and to share.
type Images struct {
	WipeDisk string // wipe-disk: fleet's examples/wipe-disk
	Install  string // install: fleet's examples/install
	NextBoot string // next-boot: fleet's examples/next-boot
	Reboot   string // reboot: Tinkerbell's waitdaemon, or an image that works as it does
}

// DefaultImages are the images fleet releases, named by the Templates'
// files: ghcr.io/fleetkit/fleet/<action>:Release for fleet's actions, and
// waitdaemon 0.2.0 for the reboot.
var DefaultImages = Images{
	WipeDisk: "ghcr.io/fleetkit/fleet/wipe-disk:" + Release,
	Install:  "ghcr.io/fleetkit/fleet/install:" + Release,
	NextBoot: "ghcr.io/fleetkit/fleet/next-boot:" + Release,
	Reboot:   "ghcr.io/jacobweinstock/waitdaemon:0.2.0",
}

// ErrImage is what errors.Is finds in the error of an image that is not
// an image reference.
var ErrImage = errors.New("not an image reference")

// imageRef is an OCI image reference: a name of lowercase path components
// under an optional registry host, then a tag, a digest, or both. It holds
// no white space, quote or brace, so it cannot change the YAML or the Go
// template it goes into.
var imageRef = regexp.MustCompile(`^([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)

// CheckImage returns an error wrapping ErrImage unless ref is an image
// reference, such as ghcr.io/fleetkit/fleet/wipe-disk:v0.1.0 or
// registry.example:5000/fleet/install@sha256:<64 hex digits>.
func CheckImage(ref string) error {
	if len(ref) > 512 || !imageRef.MatchString(ref) {
		return fmt.Errorf("%q is %w such as ghcr.io/fleetkit/fleet/wipe-disk:%s", ref, ErrImage, Release)
	}
	return nil
}

// ByAction returns the images by action name, each zero field replaced by
// its default.
func (im Images) ByAction() map[string]string {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return map[string]string{
		ActionWipeDisk: or(im.WipeDisk, DefaultImages.WipeDisk),
		ActionInstall:  or(im.Install, DefaultImages.Install),
		ActionNextBoot: or(im.NextBoot, DefaultImages.NextBoot),
		ActionReboot:   or(im.Reboot, DefaultImages.Reboot),
	}
}

// ProvisionWith returns the Template of a provision run, as Provision
// does, with its actions' images from im (nil: DefaultImages). It fails,
// wrapping ErrImage, when an image is not an image reference.
func ProvisionWith(im *Images) (*tinkerbell.Template, error) {
	return withImages(Provision(), im)
}

// RetireWith returns the Template of a retirement run, as Retire does,
// with its wipe-disk image from im (nil: DefaultImages), as ProvisionWith
// does.
func RetireWith(im *Images) (*tinkerbell.Template, error) {
	return withImages(Retire(), im)
}

// actionImage is an action's first two lines in the Templates' data: its
// name, then its image.
var actionImage = regexp.MustCompile(`(?m)^([ \t]*- name: )(\S+)\n([ \t]*image: )(\S*)[ \t]*$`)

// ActionImages returns the image of each action that the data of t names,
// by action name: what a Template in a cluster runs, whoever wrote it. An
// action written otherwise than fleet's files write them (its name, then
// its image, on the next line) is missing from the map.
func ActionImages(t *tinkerbell.Template) map[string]string {
	out := map[string]string{}
	if t == nil || t.Spec.Data == nil {
		return out
	}
	for _, m := range actionImage.FindAllStringSubmatch(*t.Spec.Data, -1) {
		out[m[2]] = m[4]
	}
	return out
}

func withImages(t *tinkerbell.Template, im *Images) (*tinkerbell.Template, error) {
	if im == nil {
		im = &Images{}
	}
	images := im.ByAction()
	var errs []error
	data := actionImage.ReplaceAllStringFunc(*t.Spec.Data, func(s string) string {
		m := actionImage.FindStringSubmatch(s)
		ref, ok := images[m[2]]
		if !ok {
			return s
		}
		if err := CheckImage(ref); err != nil {
			errs = append(errs, fmt.Errorf("the image of %s: %w", m[2], err))
			return s
		}
		return m[1] + m[2] + "\n" + m[3] + ref
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if strings.Count(data, "image: ") != len(ActionImages(&tinkerbell.Template{Spec: tinkerbell.TemplateSpec{Data: &data}})) {
		panic("templates: an action of " + t.Name + " does not name its image on the line after its name")
	}
	t.Spec.Data = &data
	return t, nil
}
