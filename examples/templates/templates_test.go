package templates

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/provision"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
)

type tinkerbellTemplate = tinkerbell.Template

// workflow is the template data's format as Tinkerbell v0.25's controller
// reads it (tink/controller/internal/workflow/types.go).
type workflow struct {
	Version       string `yaml:"version"`
	Name          string `yaml:"name"`
	ID            string `yaml:"id"`
	GlobalTimeout int    `yaml:"global_timeout"`
	Tasks         []task `yaml:"tasks"`
}

type task struct {
	Name        string            `yaml:"name"`
	WorkerAddr  string            `yaml:"worker"`
	Actions     []action          `yaml:"actions"`
	Volumes     []string          `yaml:"volumes,omitempty"`
	Environment map[string]string `yaml:"environment,omitempty"`
}

type action struct {
	Name        string            `yaml:"name"`
	Image       string            `yaml:"image"`
	Timeout     int64             `yaml:"timeout"`
	Command     []string          `yaml:"command,omitempty"`
	OnTimeout   []string          `yaml:"on-timeout,omitempty"`
	OnFailure   []string          `yaml:"on-failure,omitempty"`
	Volumes     []string          `yaml:"volumes,omitempty"`
	Environment map[string]string `yaml:"environment,omitempty"`
	Pid         string            `yaml:"pid,omitempty"`
	Namespaces  struct {
		Network string `yaml:"network,omitempty"`
		PID     string `yaml:"pid,omitempty"`
	} `yaml:"namespaces,omitempty"`
}

// A run's values, as a provision run's Workflow carries them, and the
// install code the machine's attestation received.
const (
	mac    = "3c:ec:ef:12:34:56"
	disk   = "/dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456"
	serial = "S64DNX0R123456"
	code   = "Zx81qPw0vN3mTs6YbK2dLg"
	image  = "factory.talos.dev/metal-installer-secureboot/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.13.9"
)

// values is the hardwareMap provision gives a Workflow (provision's
// newWorkflow): every Value constant, the code by its SHA-256 alone.
func values(mac, disk, serial, code, image string) map[string]any {
	return map[string]any{
		provision.ValueMAC:               mac,
		provision.ValueInstallDisk:       disk,
		provision.ValueInstallDiskSerial: serial,
		provision.ValueInstallCodeSHA256: provision.CodeSHA256(code),
		provision.ValueInstallerImage:    image,
	}
}

// valueConstants returns the names of provision's exported Value constants.
func valueConstants(t *testing.T) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "../../provision/tink.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, "Value") && n.IsExported() {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names
}

// No Template hands an action the install code: rendered with a run's
// values, no action's environment, command or volume holds it. (That a
// Template reads no value but those, the code's digest among them, is
// TestRender's: a value provision does not set fails the render.)
func TestNoCodeInRender(t *testing.T) {
	eachRun(t, func(t *testing.T, r tplRun) {
		if s := fmt.Sprintf("%+v", mustRender(t, r.data(), values(mac, disk, serial, code, image))); strings.Contains(s, code) {
			t.Errorf("the rendered run holds the install code: %s", s)
		}
	})
}

// render renders template data as Tinkerbell does: text/template, a
// missing value an error, Sprig's quote (fmt's %q).
func render(t *testing.T, data string, vals map[string]any) (workflow, error) {
	t.Helper()
	tpl, err := template.New("workflow-template").Option("missingkey=error").
		Funcs(template.FuncMap{"quote": func(s any) string { return fmt.Sprintf("%q", fmt.Sprint(s)) }}).
		Parse(data)
	if err != nil {
		t.Fatalf("the template data does not parse: %v", err)
	}
	var b bytes.Buffer
	if err := tpl.Execute(&b, vals); err != nil {
		return workflow{}, err
	}
	var wf workflow
	dec := yaml.NewDecoder(&b)
	dec.KnownFields(true)
	if err := dec.Decode(&wf); err != nil {
		t.Fatalf("the rendered template is not Tinkerbell's workflow YAML: %v\n%s", err, b.String())
	}
	return wf, nil
}

// mustRender is render that fails t when vals lack a value data reads.
func mustRender(t *testing.T, data string, vals map[string]any) workflow {
	t.Helper()
	wf, err := render(t, data, vals)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// A tplRun is a Template: its name, its YAML, its object made with the
// released images or with others, and the actions it must run, in order.
type tplRun struct {
	name    string
	get     func() []byte
	tpl     func() *tinkerbellTemplate
	with    func(*Images) (*tinkerbellTemplate, error)
	actions []string
}

// data is the Template's data, released images and all.
func (r tplRun) data() string { return *r.tpl().Spec.Data }

var runs = []tplRun{
	{ProvisionName, ProvisionYAML, Provision, ProvisionWith, []string{"wipe-disk", "install", "next-boot", "reboot"}},
	{RetireName, RetireYAML, Retire, RetireWith, []string{"wipe-disk"}},
}

// eachRun runs test as a subtest for each of runs.
func eachRun(t *testing.T, test func(t *testing.T, r tplRun)) {
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) { test(t, r) })
	}
}

func TestObjects(t *testing.T) {
	eachRun(t, func(t *testing.T, r tplRun) {
		tpl := r.tpl()
		if tpl.APIVersion != "tinkerbell.org/v1alpha1" || tpl.Kind != "Template" || tpl.Name != r.name || tpl.Namespace != "" {
			t.Errorf("the Template is %s %s %s/%s", tpl.APIVersion, tpl.Kind, tpl.Namespace, tpl.Name)
		}
		file, err := os.ReadFile(r.name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(file, r.get()) {
			t.Error("the embedded YAML is not the file")
		}
		// Each call returns a Template of its own.
		tpl.Name = "changed"
		*tpl.Spec.Data = "changed"
		if again := r.tpl(); again.Name != r.name || *again.Spec.Data == "changed" {
			t.Error("a caller's change reached the next call")
		}
	})
	// provision's defaults (provision.Config) name these.
	if ProvisionName != "fleet-provision" || RetireName != "fleet-retire" {
		t.Errorf("names %q, %q", ProvisionName, RetireName)
	}
}

// Rendered with a run's values, or with values that hold what YAML would
// read as syntax (each stays one string), each Template runs its actions
// in order on the attested MAC, each with an image reference and a
// timeout, all within the global timeout; the disk and its serial reach
// the actions as they are. (That the image is the released one is
// TestImages's, rendered with no images given.)
func TestRender(t *testing.T) {
	evilDisk := "/dev/sda\"\n            image: registry.evil/x:1\n            x: \""
	evilSerial := "S1 \\ ' \" \t: # {{ .install_code_sha256 }} é 漢"
	eachRun(t, func(t *testing.T, r tplRun) {
		for _, v := range []struct{ disk, serial string }{{disk, serial}, {evilDisk, evilSerial}} {
			wf := mustRender(t, r.data(), values(mac, v.disk, v.serial, code, image))
			if wf.Name != r.name || wf.Version != "0.1" || len(wf.Tasks) != 1 {
				t.Fatalf("workflow %q version %q with %d tasks", wf.Name, wf.Version, len(wf.Tasks))
			}
			if strings.Contains(strings.ReplaceAll(fmt.Sprint(wf), v.serial, ""), "{{") {
				t.Errorf("the rendered template still holds {{: %+v", wf)
			}
			tk := wf.Tasks[0]
			if tk.WorkerAddr != mac {
				t.Errorf("worker %q, want the attested MAC %q", tk.WorkerAddr, mac)
			}
			var names []string
			var sum int64
			for _, a := range tk.Actions {
				names = append(names, a.Name)
				if a.Timeout <= 0 {
					t.Errorf("%s has timeout %d", a.Name, a.Timeout)
				}
				sum += a.Timeout
				if err := CheckImage(a.Image); err != nil {
					t.Error(err)
				}
				for k, want := range map[string]string{"INSTALL_DISK": v.disk, "INSTALL_DISK_SERIAL": v.serial} {
					if got, ok := a.Environment[k]; ok && got != want {
						t.Errorf("%s: %s = %q, want %q", a.Name, k, got, want)
					}
				}
			}
			if !slices.Equal(names, r.actions) {
				t.Errorf("actions %q, want %q", names, r.actions)
			}
			if int64(wf.GlobalTimeout) < sum {
				t.Errorf("global timeout %d s is shorter than its actions' %d s", wf.GlobalTimeout, sum)
			}
		}
	})
}

// TestValues renders each Template without each value in turn: a value
// the Template reads is one provision sets, or Tinkerbell would refuse to
// render it, and the run would never start. The values are every value
// provision declares. (That the code's digest is the one the actions
// compute from the boot record's code is TestActionContainers's.)
func TestValues(t *testing.T) {
	if names := valueConstants(t); len(names) != len(values(mac, disk, serial, code, image)) {
		t.Errorf("provision declares the values %q; values() holds %d", names, len(values(mac, disk, serial, code, image)))
	}
	eachRun(t, func(t *testing.T, r tplRun) {
		data := r.data()
		for _, m := range regexp.MustCompile(`\{\{[^}]*\}\}`).FindAllString(data, -1) {
			if !regexp.MustCompile(`^\{\{ \.[a-z_0-9]+ \| quote \}\}$`).MatchString(m) {
				t.Errorf("%s: %s is not a quoted value", r.name, m)
			}
		}
		used := 0
		for k := range values(mac, disk, serial, code, image) {
			vals := values(mac, disk, serial, code, image)
			delete(vals, k)
			if _, err := render(t, data, vals); err != nil {
				used++
				if !strings.Contains(err.Error(), `map has no entry for key "`+k+`"`) {
					t.Errorf("without %s: %v", k, err)
				}
			}
		}
		want := 5
		if r.name == RetireName {
			want = 4 // no installer image
		}
		if used != want {
			t.Errorf("the Template reads %d of provision's values, want %d", used, want)
		}
	})
}

// actionDirs are the example actions' sources, by action name.
var actionDirs = map[string]string{"wipe-disk": "../wipe-disk", "install": "../install", "next-boot": "../next-boot"}

// optional are the variables an action reads that have documented
// defaults, so a Template may leave them unset.
var optional = map[string][]string{
	"wipe-disk": {"PULL_COMMAND", "FLEET_LOOP_DEVICES"},
	"install":   {"INSTALL_COMMAND", "CONFIG_URL_TEMPLATE"},
	"next-boot": {"NEXT_BOOT_LOADER", "NEXT_BOOT_LABEL", "EFIBOOTMGR"},
}

// readsEnv returns the variables the Go files of dir read through a
// function called getenv.
func readsEnv(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "getenv" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				if !slices.Contains(names, s) {
					names = append(names, s)
				}
			}
			return true
		})
	}
	if len(names) == 0 {
		t.Fatalf("no getenv calls in %s", dir)
	}
	return names
}

// env is what an action's container gets: the task's environment, then
// the action's over it.
func env(tk task, a action) map[string]string {
	m := map[string]string{}
	maps.Copy(m, tk.Environment)
	maps.Copy(m, a.Environment)
	return m
}

// mounts returns an action's volumes (the task's, then its own) by their
// path in the container.
func mounts(t *testing.T, tk task, a action) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, v := range append(slices.Clone(tk.Volumes), a.Volumes...) {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(parts[0], "/") || !strings.HasPrefix(parts[1], "/") ||
			(len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
			t.Errorf("%s: volume %q is not HOST:CONTAINER[:ro|rw]", a.Name, v)
			continue
		}
		if _, dup := m[parts[1]]; dup {
			t.Errorf("%s: two volumes at %s", a.Name, parts[1])
		}
		m[parts[1]] = v
	}
	return m
}

// Each action's container gets what it reads: the task's and its own
// environment set every variable the action's source reads (but those
// with a default), each to the run's value, and none it never reads; and
// the volumes it needs, the run's shared directory among them.
func TestActionContainers(t *testing.T) {
	want := map[string]string{
		"INSTALL_DISK":        disk,
		"INSTALL_DISK_SERIAL": serial,
		"INSTALL_CODE_SHA256": disksafe.CodeSHA256(code),
		"INSTALLER_IMAGE":     image,
		"FLEET_STATE_DIR":     disksafe.DefaultStateDir,
		"FLEET_BOOT_DIR":      disksafe.DefaultBootDir,
	}
	const docker = "/var/run/docker.sock:/var/run/docker.sock"
	need := map[string][]string{
		"wipe-disk": {"/dev:/dev", "/sys:/sys:ro", "/run/udev:/run/udev:ro", disksafe.DefaultBootDir + ":" + disksafe.DefaultBootDir + ":ro"},
		"install":   {docker, disksafe.DefaultBootDir + ":" + disksafe.DefaultBootDir + ":ro"},
		"next-boot": {"/dev:/dev", "/sys:/sys"},
		"reboot":    {docker},
	}
	eachRun(t, func(t *testing.T, r tplRun) {
		tk := mustRender(t, r.data(), values(mac, disk, serial, code, image)).Tasks[0]
		for _, a := range tk.Actions {
			e := env(tk, a)
			m := mounts(t, tk, a)
			for _, v := range need[a.Name] {
				target := strings.Split(v, ":")[1]
				if m[target] != v {
					t.Errorf("%s mounts %q at %s, want %q", a.Name, m[target], target, v)
				}
			}
			// The run's shared directory: one host directory in every
			// action, in a tmpfs.
			if dir := e["FLEET_STATE_DIR"]; dir != "" {
				v := m[dir]
				if !strings.HasPrefix(v, "/run/") || v != tk.Volumes[0] {
					t.Errorf("%s: FLEET_STATE_DIR %s is mounted from %q, not the task's directory in /run", a.Name, dir, v)
				}
			}
			if dir := e["FLEET_BOOT_DIR"]; dir != "" && m[dir] == "" {
				t.Errorf("%s: FLEET_BOOT_DIR %s is not mounted", a.Name, dir)
			}
			// An action that checks the code's digest reads the code
			// from the boot record, which it may not change.
			if _, checks := e["INSTALL_CODE_SHA256"]; checks && m[e["FLEET_BOOT_DIR"]] != disksafe.DefaultBootDir+":"+disksafe.DefaultBootDir+":ro" {
				t.Errorf("%s checks the code's digest, and mounts the boot record as %q", a.Name, m[e["FLEET_BOOT_DIR"]])
			}
			if a.Name == "wipe-disk" {
				_, pulls := e["INSTALLER_IMAGE"]
				if _, sock := m["/var/run/docker.sock"]; pulls != sock {
					t.Errorf("wipe-disk pulls (%t) but mounts the Docker socket (%t)", pulls, sock)
				}
			}
			// What fleet's own actions read, from their sources.
			dir, ours := actionDirs[a.Name]
			if !ours {
				continue
			}
			reads := readsEnv(t, dir)
			for _, k := range reads {
				v, set := e[k]
				switch {
				case k == "INSTALLER_IMAGE" && a.Name == "wipe-disk" && r.name == RetireName:
					if set {
						t.Errorf("%s: a retirement's wipe-disk gets INSTALLER_IMAGE %q; it must pull nothing", a.Name, v)
					}
				case slices.Contains(optional[a.Name], k):
					if set {
						t.Errorf("%s sets %s, which has a default", a.Name, k)
					}
				case !set:
					t.Errorf("%s reads %s, and the Template does not set it", a.Name, k)
				case v != want[k]:
					t.Errorf("%s: %s = %q, want %q", a.Name, k, v, want[k])
				}
			}
			for k := range a.Environment {
				if !slices.Contains(reads, k) {
					t.Errorf("%s sets %s, which the action never reads", a.Name, k)
				}
			}
		}
	})
}
