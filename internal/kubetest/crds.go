package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// CRDDir is the directory, relative to the repository root, of the CRDs
// generated from Tinkerbell's v1alpha1 API types. The control plane applies
// every *.yaml file in it.
const CRDDir = "examples/deploy/crds"

// crdGenerator is the directory, relative to the repository root, of the
// Go module whose tool controller-gen generates the CRDs.
const crdGenerator = "tools/crd"

// crdGenerateArgs returns the arguments of `go -C tools/crd` that generate
// the CRDs into outDir.
func crdGenerateArgs(outDir string) []string {
	return []string{"tool", "controller-gen", "crd",
		"paths=github.com/tinkerbell/tinkerbell/api/v1alpha1/...",
		"output:crd:dir=" + outDir}
}

//go:generate go -C ../../tools/crd tool controller-gen crd paths=github.com/tinkerbell/tinkerbell/api/v1alpha1/... output:crd:dir=../../examples/deploy/crds

// crdEstablishTimeout bounds the wait for every CRD to be Established.
const crdEstablishTimeout = 30 * time.Second

// CRDResource is the API server's CustomResourceDefinitions; the others
// are resources of the CRDs of CRDDir that tests create and read.
var (
	CRDResource      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	HardwareResource = schema.GroupVersionResource{Group: "tinkerbell.org", Version: "v1alpha1", Resource: "hardware"}
	TemplateResource = schema.GroupVersionResource{Group: "tinkerbell.org", Version: "v1alpha1", Resource: "templates"}
	WorkflowResource = schema.GroupVersionResource{Group: "tinkerbell.org", Version: "v1alpha1", Resource: "workflows"}
	MachineResource  = schema.GroupVersionResource{Group: "bmc.tinkerbell.org", Version: "v1alpha1", Resource: "machines"}
	JobResource      = schema.GroupVersionResource{Group: "bmc.tinkerbell.org", Version: "v1alpha1", Resource: "jobs"}
)

// errNoCRDs is returned when the CRD directory holds no CRD.
var errNoCRDs = errors.New("no CRD found: run go generate ./internal/kubetest")

// applyCRDs creates every CRD of dir's *.yaml files and waits until each is
// Established. It returns how many it applied and the latest time one became
// Established (as the server records it, to the second).
func applyCRDs(ctx context.Context, cfg *rest.Config, dir string) (int, time.Time, error) {
	crds, err := readCRDs(dir)
	if err != nil {
		return 0, time.Time{}, err
	}
	if len(crds) == 0 {
		return 0, time.Time{}, errNoCRDs
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("dynamic client: %w", err)
	}
	client := dyn.Resource(CRDResource)
	for _, crd := range crds {
		if _, err := client.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return 0, time.Time{}, fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	var latest time.Time
	for _, crd := range crds {
		at, err := waitEstablished(ctx, client, crd.GetName())
		if err != nil {
			return 0, time.Time{}, err
		}
		if at.After(latest) {
			latest = at
		}
	}
	return len(crds), latest, nil
}

// readCRDs decodes every document of dir's *.yaml files, in name order.
func readCRDs(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	slices.Sort(files)
	var crds []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CRD: %w", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decode %s: %w", f, err)
			}
			if obj.Object == nil {
				continue // an empty document
			}
			if obj.GetKind() != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s holds a %s %q, not a CustomResourceDefinition", f, obj.GetKind(), obj.GetName())
			}
			crds = append(crds, &obj)
		}
	}
	return crds, nil
}

// ReadCRDs returns every CRD of dir's *.yaml files, by name, as the
// control plane applies them from CRDDir. It ends t when a file cannot be
// read or holds anything but CRDs.
func ReadCRDs(t testing.TB, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	crds, err := readCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	byName := make(map[string]*unstructured.Unstructured, len(crds))
	for _, crd := range crds {
		byName[crd.GetName()] = crd
	}
	return byName
}

// waitEstablished polls CRD name until its Established condition is True
// and returns the condition's lastTransitionTime.
func waitEstablished(ctx context.Context, client dynamic.NamespaceableResourceInterface, name string) (time.Time, error) {
	for {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("get CRD %s: %w", name, err)
		}
		if err == nil {
			if at, ok := establishedAt(obj); ok {
				return at, nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("CRD %s not Established: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// establishedAt returns the lastTransitionTime of a CRD's Established=True
// condition, and false when it has none.
func establishedAt(crd *unstructured.Unstructured) (time.Time, bool) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Established" || m["status"] != "True" {
			continue
		}
		s, _ := m["lastTransitionTime"].(string)
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			// Established without a readable time: treat it as now, so
			// the caller waits the whole delay.
			at = time.Now()
		}
		return at, true
	}
	return time.Time{}, false
}
