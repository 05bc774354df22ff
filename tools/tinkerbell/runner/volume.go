package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// volume is one bind of a container: the host's path, where the container
// sees it, and whether it is read-only there.
type volume struct {
	host, container string
	ro              bool
}

// String is the volume as docker run's --volume takes it, and as the shim
// reads it back.
func (v volume) String() string {
	mode := "rw"
	if v.ro {
		mode = "ro"
	}
	return v.host + ":" + v.container + ":" + mode
}

// parseVolume reads HOST:CONTAINER[:MODE], as docker run's --volume and a
// Template's volumes write a bind: both paths absolute, CONTAINER not /,
// MODE ro or rw (the default). Docker's other modes (propagation, SELinux
// labels, nocopy) and named volumes are refused: the runner has none of
// them.
func parseVolume(s string) (volume, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return volume{}, fmt.Errorf("invalid volume specification: %q is not HOST:CONTAINER[:ro]", s)
	}
	v := volume{host: parts[0], container: parts[1]}
	if !filepath.IsAbs(v.host) {
		return volume{}, fmt.Errorf("invalid volume specification: %q: %q is not an absolute host path (the runner has no named volumes)", s, v.host)
	}
	if !filepath.IsAbs(v.container) {
		return volume{}, fmt.Errorf("invalid volume specification: %q: %q is not an absolute container path", s, v.container)
	}
	v.host, v.container = filepath.Clean(v.host), filepath.Clean(v.container)
	if v.container == "/" {
		return volume{}, fmt.Errorf("invalid volume specification: %q: destination can't be '/'", s)
	}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
			v.ro = true
		case "rw":
		default:
			return volume{}, fmt.Errorf("invalid volume specification: %q: mode %q is not ro or rw (the runner honours no other)", s, parts[2])
		}
	}
	return v, nil
}

// parseVolumes reads a container's volumes and orders them as Docker
// mounts them: a path before the paths under it. Two volumes at one
// container path are refused, as Docker refuses them.
func parseVolumes(specs []string) ([]volume, error) {
	vols := make([]volume, 0, len(specs))
	seen := map[string]bool{}
	for _, s := range specs {
		v, err := parseVolume(s)
		if err != nil {
			return nil, err
		}
		if seen[v.container] {
			return nil, fmt.Errorf("duplicate mount point: %s", v.container)
		}
		seen[v.container] = true
		vols = append(vols, v)
	}
	slices.SortStableFunc(vols, func(a, b volume) int {
		return strings.Count(a.container, "/") - strings.Count(b.container, "/")
	})
	return vols, nil
}
