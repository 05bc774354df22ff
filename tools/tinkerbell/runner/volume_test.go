package main

import (
	"slices"
	"strings"
	"testing"
)

// parseVolume reads the binds fleet's Templates write, and refuses what
// the runner cannot honour.
func TestParseVolume(t *testing.T) {
	for _, c := range []struct {
		spec string
		want volume
	}{
		{"/dev:/dev", volume{host: "/dev", container: "/dev"}},
		{"/sys:/sys:ro", volume{host: "/sys", container: "/sys", ro: true}},
		{"/run/fleet-workflow:/workflow", volume{host: "/run/fleet-workflow", container: "/workflow"}},
		{"/run/fleet:/run/fleet:rw", volume{host: "/run/fleet", container: "/run/fleet"}},
		{"/a/b/:/c/./d", volume{host: "/a/b", container: "/c/d"}},
	} {
		got, err := parseVolume(c.spec)
		if err != nil || got != c.want {
			t.Errorf("parseVolume(%q) = %+v, %v; want %+v", c.spec, got, err, c.want)
		}
		if back, err := parseVolume(got.String()); err != nil || back != got {
			t.Errorf("parseVolume(%q) = %+v, %v; want %+v back", got.String(), back, err, got)
		}
	}
	for _, bad := range []string{
		"/dev",
		"/a:/b:ro:x",
		"data:/data",
		"./data:/data",
		"/data:data",
		"/data:/",
		"/data:/data:rro",
		"/data:/data:ro,rprivate",
		"/data:/data:z",
		"/data:/data:",
	} {
		if v, err := parseVolume(bad); err == nil {
			t.Errorf("parseVolume(%q) = %+v, want an error", bad, v)
		} else if !strings.HasPrefix(err.Error(), "invalid volume specification: ") {
			t.Errorf("parseVolume(%q): %v, want an invalid volume specification", bad, err)
		}
	}
}

// parseVolumes mounts a path before the paths under it, keeps the
// Template's order otherwise, and refuses two binds at one path.
func TestParseVolumes(t *testing.T) {
	vols, err := parseVolumes([]string{"/run/fleet-workflow:/workflow", "/e:/sys/firmware/efi/efivars", "/dev:/dev", "/sys:/sys:ro"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vols {
		got = append(got, v.String())
	}
	want := []string{"/run/fleet-workflow:/workflow:rw", "/dev:/dev:rw", "/sys:/sys:ro", "/e:/sys/firmware/efi/efivars:rw"}
	if !slices.Equal(got, want) {
		t.Errorf("parseVolumes = %q, want %q", got, want)
	}
	if _, err := parseVolumes([]string{"/a:/data", "/b:/data/:ro"}); err == nil || err.Error() != "duplicate mount point: /data" {
		t.Errorf("two binds at /data: %v, want duplicate mount point: /data", err)
	}
	if _, err := parseVolumes([]string{"/dev:/dev", "dev"}); err == nil {
		t.Error("parseVolumes took a volume without a container path")
	}
}

// The shim's arguments are what container writes.
func TestParseShim(t *testing.T) {
	cmd := container(t.Context(), "/images/x/rootfs", []volume{{host: "/dev", container: "/dev"}, {host: "/sys", container: "/sys", ro: true}}, "/bin/installer", []string{"install", "--", "-x"})
	if cmd.Path != "/proc/self/exe" || len(cmd.Args) < 2 || cmd.Args[1] != shimArg {
		t.Fatalf("container runs %s %q, want /proc/self/exe %s ...", cmd.Path, cmd.Args, shimArg)
	}
	root, vols, argv, err := parseShim(cmd.Args[2:])
	if err != nil {
		t.Fatal(err)
	}
	if root != "/images/x/rootfs" || len(vols) != 2 || vols[1] != (volume{host: "/sys", container: "/sys", ro: true}) ||
		!slices.Equal(argv, []string{"/bin/installer", "install", "--", "-x"}) {
		t.Errorf("parseShim = %q, %+v, %q", root, vols, argv)
	}
	for _, bad := range [][]string{
		{"/", "--"},
		{"/", "/dev:/dev"},
		{"--", "/bin/true"},
		{"rootfs", "--", "/bin/true"},
		{"/", "dev", "--", "/bin/true"},
	} {
		if _, _, _, err := parseShim(bad); err == nil {
			t.Errorf("parseShim(%q) took it", bad)
		}
	}
}
