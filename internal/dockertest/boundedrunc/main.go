// Command boundedrunc is runc for a dockerd of dockertest that runs where
// the test's own capability bounding set lacks capabilities the kernel
// knows (a sandboxed test machine: CAP_SYS_RESOURCE has been seen
// missing). dockerd gives a privileged container every capability the
// kernel knows, and runc then fails to start it ("unable to apply caps:
// operation not permitted"), since no process can gain a capability
// outside its bounding set.
//
// boundedrunc takes runc's arguments. Before runc creates or runs a
// container (--bundle DIR, or the working directory, holding config.json)
// or executes a process in one (--process FILE), it removes from the
// spec's capability sets every capability that its own bounding set, which
// runc and the container inherit, lacks. Then it executes runc, the
// program main.runc names (set with -ldflags -X at build), with the same
// arguments. A container so started holds every capability this machine
// allows; on a machine whose bounding set is full, dockertest does not use
// boundedrunc at all.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runc is the real runc's path.
var runc = "/usr/sbin/runc"

// capNames are the kernel's capabilities by number, as OCI specs name them.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

func main() {
	args := os.Args[1:]
	if err := bound(args); err != nil {
		fmt.Fprintf(os.Stderr, "boundedrunc: %v\n", err)
		os.Exit(1)
	}
	err := syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "boundedrunc: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// bound removes the capabilities outside the bounding set from the spec
// that runc's command in args reads, if any.
func bound(args []string) error {
	cmd, bundle, process := command(args)
	var file string
	var capsOf func(map[string]any) map[string]any
	switch cmd {
	case "create", "run":
		if bundle == "" {
			bundle = "."
		}
		file = filepath.Join(bundle, "config.json")
		capsOf = func(spec map[string]any) map[string]any {
			p, _ := spec["process"].(map[string]any)
			c, _ := p["capabilities"].(map[string]any)
			return c
		}
	case "exec":
		if process == "" {
			return nil
		}
		file = process
		capsOf = func(p map[string]any) map[string]any {
			c, _ := p["capabilities"].(map[string]any)
			return c
		}
	default:
		return nil
	}
	lacking, err := lacked()
	if err != nil || len(lacking) == 0 {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	caps := capsOf(spec)
	if caps == nil {
		return nil
	}
	for set, v := range caps {
		list, _ := v.([]any)
		kept := []any{}
		for _, c := range list {
			if name, _ := c.(string); !lacking[name] {
				kept = append(kept, c)
			}
		}
		caps[set] = kept
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o600)
}

// command returns runc's command in args, after its global flags, and the
// values of its --bundle (-b) and --process (-p) flags.
func command(args []string) (cmd, bundle, process string) {
	valued := map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		if valued[args[i]] {
			i++
		}
	}
	if i == len(args) {
		return "", "", ""
	}
	cmd = args[i]
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		flag, value, ok := strings.Cut(rest[j], "=")
		if !ok && j+1 < len(rest) {
			value = rest[j+1]
		}
		switch flag {
		case "--bundle", "-b":
			bundle = value
		case "--process", "-p":
			process = value
		}
	}
	return cmd, bundle, process
}

// lacked returns the names of the capabilities the kernel knows that this
// process's bounding set lacks.
func lacked() (map[string]bool, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return nil, err
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("cap_last_cap: %w", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	var bnd uint64
	found := false
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			bnd, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return nil, fmt.Errorf("CapBnd: %w", err)
			}
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("/proc/self/status holds no CapBnd")
	}
	lacking := map[string]bool{}
	for c := 0; c <= last && c < len(capNames); c++ {
		if bnd&(1<<c) == 0 {
			lacking[capNames[c]] = true
		}
	}
	return lacking, nil
}
