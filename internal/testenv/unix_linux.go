package testenv

import (
	"os"
	"strconv"
	"strings"
)

// soAcceptCon is the flag /proc/net/unix shows for a listening socket.
const soAcceptCon = 1 << 16

// UnixListening reports whether a unix socket listens at path, as the
// network namespace of the caller sees it. A socket file alone does not
// say so: a server binds before it listens, and a dial in between is
// refused.
func UnixListening(path string) bool {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// Num RefCount Protocol Flags Type St Inode, then the path as
		// it was bound, spaces and all.
		var fields []string
		rest := line
		for range 7 {
			rest = strings.TrimLeft(rest, " ")
			i := strings.IndexByte(rest, ' ')
			if i < 0 {
				break
			}
			fields, rest = append(fields, rest[:i]), rest[i+1:]
		}
		if len(fields) < 7 || rest != path {
			continue
		}
		if flags, err := strconv.ParseUint(fields[3], 16, 32); err == nil && flags&soAcceptCon != 0 {
			return true
		}
	}
	return false
}
