package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// workflowResource is Tinkerbell's Workflow, read as unstructured objects so
// that fleetctl links no Tinkerbell code.
var workflowResource = schema.GroupVersionResource{Group: "tinkerbell.org", Version: "v1alpha1", Resource: "workflows"}

// workflow is what status shows of a Workflow.
type workflow struct {
	Name   string
	State  string // status.state, e.g. RUNNING, SUCCESS; "" before tink-controller set it
	Action string // status.currentState.actionName: the action running or last run
}

// workflows reads the Workflows of one namespace of a cluster.
type workflows struct {
	client    dynamic.Interface
	namespace string
	host      string // the API server's URL, for errors
}

// newWorkflows reads Workflows with the kubeconfig at path, in namespace.
func newWorkflows(path, namespace string) (*workflows, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return &workflows{client: client, namespace: namespace, host: cfg.Host}, nil
}

// byName lists the namespace's Workflows, by name.
func (w *workflows) byName(ctx context.Context) (map[string]workflow, error) {
	list, err := w.client.Resource(workflowResource).Namespace(w.namespace).List(ctx, metav1.ListOptions{})
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		// The API server did not answer: one short line, as for NetBox.
		return nil, fmt.Errorf("the Kubernetes API server at %s did not answer: %s", w.host, unansweredReason(err))
	case err != nil:
		return nil, fmt.Errorf("list the Workflows of namespace %s: %w", w.namespace, err)
	}
	out := make(map[string]workflow, len(list.Items))
	for _, item := range list.Items {
		state, _, _ := unstructured.NestedString(item.Object, "status", "state")
		action, _, _ := unstructured.NestedString(item.Object, "status", "currentState", "actionName")
		out[item.GetName()] = workflow{Name: item.GetName(), State: state, Action: action}
	}
	return out, nil
}
