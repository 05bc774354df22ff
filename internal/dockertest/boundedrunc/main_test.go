package main

import "testing"

// command finds runc's command and spec files in the arguments
// containerd's runc shim passes.
func TestCommand(t *testing.T) {
	for _, c := range []struct {
		args                 []string
		cmd, bundle, process string
	}{
		{[]string{"--root", "/run/containerd/runc/moby", "--log", "/x/log.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/init.pid", "id1"}, "create", "/b", ""},
		{[]string{"--root", "/r", "--systemd-cgroup", "run", "-b=/b2", "id2"}, "run", "/b2", ""},
		{[]string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id3"}, "exec", "", "/tmp/p.json"},
		{[]string{"--root", "/r", "delete", "--force", "id4"}, "delete", "", ""},
		{[]string{"--version"}, "", "", ""},
	} {
		cmd, bundle, process := command(c.args)
		if cmd != c.cmd || bundle != c.bundle || process != c.process {
			t.Errorf("command(%q) = %q, %q, %q; want %q, %q, %q", c.args, cmd, bundle, process, c.cmd, c.bundle, c.process)
		}
	}
}
