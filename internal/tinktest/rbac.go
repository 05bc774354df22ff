package tinktest

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// ServiceAccount is the name of the ServiceAccount, in the namespace Start
// is given, that tinkerbell authenticates as.
const ServiceAccount = "tinkerbell"

// crdNames are the CRDs tinkerbell's migration applies: its seven v1alpha1
// kinds.
var crdNames = []string{
	"hardware.tinkerbell.org",
	"templates.tinkerbell.org",
	"workflows.tinkerbell.org",
	"workflowrulesets.tinkerbell.org",
	"jobs.bmc.tinkerbell.org",
	"machines.bmc.tinkerbell.org",
	"tasks.bmc.tinkerbell.org",
}

// rules returns what Start grants ServiceAccount in every namespace: the
// rules of Tinkerbell v0.25.0's Helm chart for tink-server, tink-controller
// and Rufio (helm/tinkerbell/templates/role.yaml, as a ClusterRole, its
// default), and its Secrets rule (role-secrets.yaml), with the CRD rule
// narrowed to what the CRD migration does (crd/crd.go): a server-side
// apply of each CRD, else a get and an update, else a create; then a get
// of each until it is Established. get, patch and update are limited to
// its seven CRDs by name. create cannot be: the API server authorizes the
// create an apply makes of a missing CRD, like any create, before the
// object has a name. So create is granted only when withCreate, for a
// control plane that lacks one of the seven; where all exist, the apply
// conflicts on the controller-gen version annotation or succeeds, and
// the update needs no create. The chart's list and delete of CRDs are
// left out: nothing in tinkerbell uses them.
func rules(withCreate bool) []rbacv1.PolicyRule {
	all := []string{"create", "get", "list", "patch", "update", "watch"}
	rs := []rbacv1.PolicyRule{
		{
			APIGroups:     []string{"apiextensions.k8s.io"},
			Resources:     []string{"customresourcedefinitions"},
			ResourceNames: append([]string(nil), crdNames...),
			Verbs:         []string{"get", "patch", "update"},
		},
		{
			APIGroups: []string{"tinkerbell.org"},
			Resources: []string{"hardware", "hardware/status"},
			Verbs:     all,
		},
		{
			APIGroups: []string{"tinkerbell.org"},
			Resources: []string{"templates", "templates/status"},
			Verbs:     []string{"get", "list", "patch", "update", "watch"},
		},
		{
			APIGroups: []string{"tinkerbell.org"},
			Resources: []string{"workflows", "workflows/status"},
			Verbs:     all,
		},
		{
			APIGroups: []string{"tinkerbell.org"},
			Resources: []string{"workflowrulesets"},
			Verbs:     []string{"get", "list", "watch"},
		},
		{
			APIGroups: []string{"bmc.tinkerbell.org"},
			Resources: []string{"jobs", "jobs/status", "tasks", "tasks/status"},
			Verbs:     []string{"create", "delete", "get", "list", "patch", "update", "watch", "deletecollection"},
		},
		{
			APIGroups: []string{"bmc.tinkerbell.org"},
			Resources: []string{"machines", "machines/status"},
			Verbs:     []string{"get", "list", "patch", "update", "watch"},
		},
		{
			APIGroups: []string{"bmc.tinkerbell.org"},
			Resources: []string{"jobs/finalizers", "machines/finalizers", "tasks/finalizers"},
			Verbs:     []string{"update"},
		},
		{
			APIGroups: []string{""},
			Resources: []string{"secrets"},
			Verbs:     []string{"get", "list", "watch"},
		},
	}
	if withCreate {
		rs = append(rs, rbacv1.PolicyRule{
			APIGroups: []string{"apiextensions.k8s.io"},
			Resources: []string{"customresourcedefinitions"},
			Verbs:     []string{"create"},
		})
	}
	return rs
}
