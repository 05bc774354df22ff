package kubetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Dynamic returns a dynamic client of cfg, or ends t.
func Dynamic(t testing.TB, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// Clientset returns a clientset of cfg, or ends t.
func Clientset(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Create creates obj, a typed object of a custom resource gvr whose kind
// is the name of obj's type (tinkerbell.Workflow: Workflow), in namespace
// ns, or ends t.
func Create(ctx context.Context, t testing.TB, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string, obj runtime.Object) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(reflect.TypeOf(obj).Elem().Name())
	if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// WaitFor reads the object name of gvr in ns into obj, a pointer to its
// typed zero value, until done reports true; it ends t when ctx ends
// first.
func WaitFor(ctx context.Context, t testing.TB, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, obj any, done func() bool) {
	t.Helper()
	for {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			reflect.ValueOf(obj).Elem().SetZero()
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				t.Fatal(err)
			}
			if done() {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s %s/%s: %v; last read %+v", gvr.Resource, ns, name, ctx.Err(), obj)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitGone waits until the object name of client is gone: a read of it
// answers NotFound. When ctx ends first it returns ctx's error with the
// last read's.
func WaitGone(ctx context.Context, client dynamic.ResourceInterface, name string) error {
	for {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last read: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
