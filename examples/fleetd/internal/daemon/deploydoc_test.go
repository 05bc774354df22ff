package daemon

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/fleetkit/fleet/examples/templates"
	"github.com/fleetkit/fleet/internal/testenv"
)

// deployDir is examples/deploy, from this package's directory.
const deployDir = "../../../deploy"

// overlayBlock is examples/deploy/README.md's overlay: the YAML block
// that starts with its file's name.
var overlayBlock = regexp.MustCompile("(?s)```yaml\n# overlay/kustomization.yaml\n(.*?)```")

// TestDeployImageSettings renders the overlay examples/deploy/README.md
// gives for the actions' images and the BMCs' Secret, as the README says
// to: fleetd reads each setting its ConfigMap sets (the Templates it makes
// with those images are TestEnsureTemplatesCreates's).
func TestDeployImageSettings(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(deployDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := overlayBlock.FindSubmatch(readme)
	if m == nil {
		t.Fatal("examples/deploy/README.md holds no overlay/kustomization.yaml block")
	}
	base, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base) // kustomize refuses an absolute base
	if err != nil {
		t.Fatal(err)
	}
	k := strings.Replace(string(m[1]), "  - ../examples/deploy\n", "  - "+filepath.ToSlash(rel)+"\n", 1)
	if k == string(m[1]) {
		t.Fatal("the overlay's resources do not name ../examples/deploy")
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	data := configMapData(t, dir, "fleetd")
	if data == nil {
		t.Fatal("the overlay renders no ConfigMap fleetd")
	}
	s, err := readWith(data)
	if err != nil {
		t.Fatalf("the overlay's settings: %v", err)
	}
	want := templates.Images{
		WipeDisk: data["FLEET_IMAGE_WIPE_DISK"], Install: data["FLEET_IMAGE_INSTALL"],
		NextBoot: data["FLEET_IMAGE_NEXT_BOOT"], Reboot: data["FLEET_IMAGE_REBOOT"],
	}
	if s.Images != want || want.WipeDisk == "" || want.Install == "" || want.NextBoot == "" || want.Reboot == "" {
		t.Errorf("the overlay's ConfigMap sets %v; fleetd reads the images %+v", data, s.Images)
	}
	if s.BMCSecret != data["FLEET_BMC_SECRET"] || s.BMCSecret == "bmc-auth" {
		t.Errorf("the overlay's ConfigMap sets FLEET_BMC_SECRET=%q; fleetd reads %q", data["FLEET_BMC_SECRET"], s.BMCSecret)
	}
	for k, v := range data {
		if !strings.Contains(envHelp, "\n  "+k) {
			t.Errorf("the ConfigMap sets %s=%q, which fleetd -help does not name", k, v)
		}
	}
}

// configMapData renders the kustomization in dir with tools/kustomize
// (kustomize's Go API in a module of its own), and returns the data of its
// ConfigMap name; nil: it renders none.
func configMapData(t *testing.T, dir, name string) map[string]string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "needs the go command on PATH to run tools/kustomize")
	}
	cmd := exec.CommandContext(t.Context(), goCmd, "-C", filepath.Join("..", "..", "..", "..", "tools", "kustomize"), "run", ".", dir)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go -C tools/kustomize run . %s: %v\n%s", dir, err, stderr.String())
	}
	var data map[string]string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return data
		} else if err != nil {
			t.Fatalf("decode kustomize %s: %v", dir, err)
		}
		if u.Object != nil && u.GetKind() == "ConfigMap" && u.GetName() == name && data == nil {
			if data, _, err = unstructured.NestedStringMap(u.Object, "data"); err != nil {
				t.Fatal(err)
			}
		}
	}
}
