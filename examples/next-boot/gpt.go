package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fleetkit/fleet/disksafe"
)

// esp is an EFI system partition as a boot entry's HD() node names it.
type esp struct {
	Index int    // the partition's number, from 1
	GUID  string // its unique partition GUID, lowercase
}

func (e esp) String() string { return fmt.Sprintf("partition %d (%s)", e.Index, e.GUID) }

// errNoGPT: the disk holds no valid primary GPT.
var errNoGPT = disksafe.ErrNoGPT

// findESP reads the primary GPT of the disk r of size bytes (whose logical
// sector is 512 or 4096 bytes: where the header's signature is says which)
// with disksafe.ReadGPT, and returns its one EFI system partition.
func findESP(r io.ReaderAt, size int64) (esp, error) {
	var g disksafe.GPT
	err := errNoGPT
	for _, ss := range []int64{512, 4096} {
		if g, err = disksafe.ReadGPT(r, size, ss); err != errNoGPT {
			// Found, or a header there that fails a check.
			break
		}
	}
	if err != nil {
		return esp{}, err
	}
	var found []esp
	for _, p := range g.Partitions {
		if p.Type == disksafe.ESPType {
			found = append(found, esp{Index: p.Index, GUID: p.ID.String()})
		}
	}
	switch len(found) {
	case 0:
		return esp{}, errors.New("no EFI system partition")
	case 1:
		return found[0], nil
	default:
		var s []string
		for _, f := range found {
			s = append(s, f.String())
		}
		return esp{}, fmt.Errorf("more than one EFI system partition: %s", strings.Join(s, ", "))
	}
}
