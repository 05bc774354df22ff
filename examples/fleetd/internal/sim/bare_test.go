package sim

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/provision"
)

// bareAdmissions makes, for each of n machines, the five Kubernetes
// requests fleetd makes to admit a worker on first sight, and nothing
// else: create its Hardware, its Rufio Machine and its bootstrap token's
// Secret, list its Workflows, create its Workflow. The objects are the
// size of fleetd's, the clients are made as fleetd makes them (its
// kubeconfig, rate limits included, counted by calls), and conc machines
// go at once, as fleetd admits at most conc at once. It returns the wall
// time of the n machines: the pace of the storm's Kubernetes side with
// no attestation, NetBox, render or machine in the way.
func bareAdmissions(tb testing.TB, env *kubetest.Env, n, conc int, calls *kubeCalls) time.Duration {
	tb.Helper()
	ns, kube, tink := countedClients(tb, env, calls)
	ctx := tb.Context()
	suffix := ns[len(ns)-5:] // the namespace's random suffix: this round's Secrets are its own
	admit := func(i int) error {
		name, id := fmt.Sprintf("w-%04d", i), strconv.Itoa(100000+i)
		labels := map[string]any{provision.LabelManagedBy: "fleet", provision.LabelDeviceID: id}
		hw := object("tinkerbell.org/v1alpha1", "Hardware", name, ns, labels, map[string]any{
			"interfaces": []any{map[string]any{
				"dhcp": map[string]any{
					"mac": fmt.Sprintf("02:00:00:00:%02x:%02x", i>>8&0xff, i&0xff), "hostname": name, "uefi": true,
					"ip": map[string]any{"address": fmt.Sprintf("10.1.%d.%d", i/250, i%250+2), "family": int64(4), "netmask": "255.255.0.0", "gateway": "10.1.0.1"},
				},
				"netboot": map[string]any{"allowPXE": true, "allowWorkflow": true},
			}},
			"disks":  []any{map[string]any{"device": "/dev/nvme0n1"}},
			"bmcRef": map[string]any{"apiGroup": "bmc.tinkerbell.org", "kind": "Machine", "name": name},
		})
		if _, err := tink.Resource(provision.HardwareResource).Namespace(ns).Create(ctx, hw, metav1.CreateOptions{}); err != nil {
			return err
		}
		m := object("bmc.tinkerbell.org/v1alpha1", "Machine", name, ns, labels, map[string]any{
			"connection": map[string]any{
				"host":            fmt.Sprintf("10.1.%d.%d", i/250, i%250+2),
				"insecureTLS":     false,
				"authSecretRef":   map[string]any{"name": "bmc-auth", "namespace": ns},
				"providerOptions": map[string]any{"intelAMT": map[string]any{"hostScheme": "http"}},
			},
		})
		if _, err := tink.Resource(provision.MachineResource).Namespace(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			return err
		}
		tokenID := fmt.Sprintf("%06d", i)
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: "bootstrap-token-" + suffix + tokenID, Namespace: "kube-system",
				Labels:      map[string]string{provision.LabelManagedBy: "fleet", provision.LabelDeviceID: id},
				Annotations: map[string]string{"fleet.fleetkit.dev/node": name, "fleet.fleetkit.dev/run": "provision-" + name},
			},
			Type: "bootstrap.kubernetes.io/token",
			Data: map[string][]byte{
				"description":                    []byte("fleet: " + name + "'s bootstrap token for provision-" + name),
				"token-id":                       []byte(tokenID),
				"token-secret":                   []byte("0123456789abcdef"),
				"expiration":                     []byte(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)),
				"usage-bootstrap-authentication": []byte("true"),
				"usage-bootstrap-signing":        []byte("true"),
				"auth-extra-groups":              []byte("system:bootstrappers:nodes"),
			},
		}
		if _, err := kube.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := tink.Resource(provision.WorkflowResource).Namespace(ns).List(ctx, metav1.ListOptions{
			LabelSelector: provision.LabelManagedBy + "=fleet," + provision.LabelDeviceID + "=" + id,
		}); err != nil {
			return err
		}
		wf := object("tinkerbell.org/v1alpha1", "Workflow", "provision-"+name, ns, labels, map[string]any{
			"templateRef": "fleet-provision",
			"hardwareRef": name,
			"hardwareMap": map[string]any{
				"device_1": fmt.Sprintf("02:00:00:00:%02x:%02x", i>>8&0xff, i&0xff), "install_disk": "/dev/nvme0n1",
				"install_disk_serial": "S" + id, "install_code_sha256": fmt.Sprintf("%064d", i), "installer_image": "ghcr.io/siderolabs/installer:v1.11.5",
			},
		})
		wf.SetAnnotations(map[string]string{"fleet.fleetkit.dev/node": name, "fleet.fleetkit.dev/created": time.Now().UTC().Format(time.RFC3339)})
		_, err := tink.Resource(provision.WorkflowResource).Namespace(ns).Create(ctx, wf, metav1.CreateOptions{})
		return err
	}
	var (
		wg   sync.WaitGroup
		next = make(chan int)
		errs = make(chan error, n)
	)
	t0 := time.Now()
	for range conc {
		wg.Go(func() {
			for i := range next {
				if err := admit(i); err != nil {
					errs <- fmt.Errorf("machine %d: %w", i, err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	wall := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatalf("the bare loop: %v (and %d more)", err, len(errs))
	}
	tb.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = env.Admin().CoreV1().Secrets("kube-system").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{
			LabelSelector: provision.LabelManagedBy + "=fleet",
		})
	})
	return wall
}

// object is an unstructured object of apiVersion and kind with spec.
func object(apiVersion, kind, name, ns string, labels, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec":       spec,
	}}
}
