// Package crd holds the Tinkerbell API packages in this module's build list,
// so that controller-gen, run from here, finds the types it generates CRDs
// from.
package crd

import (
	_ "github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	_ "github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
)
