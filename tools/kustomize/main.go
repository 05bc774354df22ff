// Command kustomize renders a kustomization with kustomize's Go API, as
// `kustomize build DIR` does, and writes the objects to standard output as
// one YAML stream. fleet's deploy test runs it to render examples/deploy;
// it is a module of its own so that kustomize's dependencies stay out of
// the main module, whose users never download them.
//
//	go -C tools/kustomize run . DIR
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kustomize DIR")
		os.Exit(2)
	}
	out, err := build(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "kustomize %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

// build renders the kustomization in dir with kustomize's defaults (files
// only from within the kustomization's root, no plugins).
func build(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}
