//go:build !linux

package disksafe

import (
	"io/fs"
	"os"
)

func newRootFS(dir string) fs.FS { return os.DirFS(dir) }
