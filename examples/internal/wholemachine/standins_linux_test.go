package wholemachine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/siderolabs/talos/pkg/machinery/meta"

	"github.com/fleetkit/fleet/disksafe"
)

// The docker CLI, as the machine's actions run it: "docker pull IMAGE" and
// "docker run [FLAGS] IMAGE [ARG...]". The machine's image cache is a file
// in its /run (HookOS's Docker keeps its state in RAM too), so a new boot
// of the machine starts without the installer.
const dockerImages = "/run/docker-standin/images"

func dockerMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "docker: no command")
		return 1
	}
	switch args[0] {
	case "pull":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, `"docker pull" requires exactly 1 argument.`)
			return 1
		}
		return dockerPull(args[1])
	case "run":
		return dockerRun(args[1:])
	}
	fmt.Fprintf(os.Stderr, "docker: '%s' is not a docker command.\n", args[0])
	return 1
}

func dockerPull(image string) int {
	if err := os.MkdirAll(filepath.Dir(dockerImages), 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := os.OpenFile(dockerImages, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	fmt.Fprintln(f, image)
	_, tag, _ := strings.Cut(image, ":")
	fmt.Printf("%s: Pulling from %s\nDigest: sha256:%064x\nStatus: Downloaded newer image for %s\n%s\n", tag, image, len(image), image, image)
	return 0
}

func pulled(image string) bool {
	b, err := os.ReadFile(dockerImages)
	return err == nil && slices.Contains(strings.Split(string(b), "\n"), image)
}

// dockerRun runs the one image the actions run, the Talos installer, as
// the installer: its entrypoint /bin/installer with "install".
func dockerRun(args []string) int {
	withValue := map[string]bool{"--volume": true, "-v": true, "--env": true, "-e": true, "--entrypoint": true,
		"--network": true, "--pid": true, "--pull": true, "--name": true}
	var env []string
	entrypoint, pull := "", "missing"
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		flag, value, hasValue := strings.Cut(args[i], "=")
		if withValue[flag] && !hasValue {
			i++
			if i == len(args) {
				fmt.Fprintf(os.Stderr, "flag needs an argument: %s\n", flag)
				return 125
			}
			value = args[i]
		}
		switch flag {
		case "--env", "-e":
			env = append(env, value)
		case "--entrypoint":
			entrypoint = value
		case "--pull":
			pull = value
		}
	}
	if i == len(args) {
		fmt.Fprintln(os.Stderr, `"docker run" requires at least 1 argument.`)
		return 125
	}
	image, cmd := args[i], args[i+1:]
	if !pulled(image) {
		if pull == "never" {
			fmt.Fprintf(os.Stderr, "docker: Error response from daemon: No such image: %s.\n", image)
			return 125
		}
		fmt.Fprintf(os.Stderr, "docker: Error response from daemon: pull access denied for %s.\n", image)
		return 125
	}
	if entrypoint != "/bin/installer" || len(cmd) == 0 || cmd[0] != "install" {
		fmt.Fprintf(os.Stderr, "docker: the image %s runs only /bin/installer install, not %s %q\n", image, entrypoint, cmd)
		return 127
	}
	// --env NAME passes the CLI's own value on; NAME=VALUE sets one.
	vars := map[string]string{}
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok {
			vars[k] = v
		} else if v, ok := os.LookupEnv(e); ok {
			vars[e] = v
		}
	}
	return installer(image, cmd[1:], vars)
}

// The stand-in installer image's layout: an EFI system partition, META,
// STATE and EPHEMERAL, as a Talos UKI install lays them out, in 512-byte
// sectors.
const (
	installerVersion = "v1.13.9"
	imageMark        = "FLEET WHOLE-MACHINE TALOS IMAGE\n"
	metaMark         = "FLEET WHOLE-MACHINE META\n"
)

// installer is the Talos installer of the stand-in image: "install --disk
// DISK --platform metal". It refuses a disk that is not empty, as Talos's
// does, lays out a GPT with sfdisk, marks the EFI system partition with
// imageMark and the image, and writes the META values of
// INSTALLER_META_BASE64 (the installer's own variable, decoded as it
// decodes it) to the META partition, one "0xKEY VALUE" line each. It logs
// as the installer logs, with Go's log timestamps.
func installer(image string, args []string, env map[string]string) int {
	lg := log.New(os.Stdout, "", log.LstdFlags)
	disk, platform := "", ""
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--disk":
			disk = args[i+1]
		case "--platform":
			platform = args[i+1]
		}
	}
	lg.Printf("running Talos installer %s", installerVersion)
	if disk == "" || platform != "metal" {
		lg.Printf("error: install --disk DISK --platform metal, got %q", args)
		return 1
	}
	values, err := meta.DecodeValues(env["INSTALLER_META_BASE64"])
	if err != nil {
		lg.Printf("error decoding META values: %v", err)
		return 1
	}
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		lg.Printf("failed to open %s: %v", disk, err)
		return 1
	}
	defer f.Close()
	head := make([]byte, 1024)
	if _, err := f.ReadAt(head, 0); err != nil {
		lg.Printf("failed to read %s: %v", disk, err)
		return 1
	}
	if bytes.Equal(head[510:512], []byte{0x55, 0xaa}) || bytes.Equal(head[512:520], []byte("EFI PART")) {
		lg.Printf("failed to perform disk operations: disk %s is not empty, skipping install", disk)
		return 1
	}
	lg.Printf("creating new partition table on %s", disk)
	const layout = "label: gpt\n" +
		"start=2048, size=32768, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"EFI\"\n" +
		"size=2048, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"META\"\n" +
		"size=32768, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"STATE\"\n" +
		"type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"EPHEMERAL\"\n"
	sf := exec.Command("sfdisk", "-q", "--no-reread", "--no-tell-kernel", disk)
	sf.Stdin = strings.NewReader(layout)
	if out, err := sf.CombinedOutput(); err != nil {
		lg.Printf("failed to partition %s: %v: %s", disk, err, out)
		return 1
	}
	size, _ := f.Seek(0, io.SeekEnd)
	gpt, err := disksafe.ReadGPT(f, size, 512)
	if err != nil || len(gpt.Partitions) != 4 {
		lg.Printf("failed to read back the partition table of %s: %v", disk, err)
		return 1
	}
	for _, p := range gpt.Partitions {
		lg.Printf("created %s partition %d: sectors %d-%d", disk, p.Index, p.FirstLBA, p.LastLBA)
	}
	var m strings.Builder
	m.WriteString(metaMark)
	for _, v := range values {
		fmt.Fprintf(&m, "%#x %s\n", v.Key, v.Value)
	}
	writes := []struct {
		part int
		data string
	}{{0, imageMark + "image " + image + "\n"}, {1, m.String()}}
	for _, w := range writes {
		if _, err := f.WriteAt([]byte(w.data), gpt.Partitions[w.part].FirstLBA*512); err != nil {
			lg.Printf("failed to write %s: %v", disk, err)
			return 1
		}
	}
	lg.Printf("writing %d META values", len(values))
	if err := f.Sync(); err != nil {
		lg.Printf("failed to sync %s: %v", disk, err)
		return 1
	}
	lg.Printf("installation of %s complete", installerVersion)
	return 0
}

// readInstall reads back what the stand-in installer wrote to disk: the
// image it installed and the META values, as the installed Talos reads
// its META partition. ok is false when the disk holds no such install.
func readInstall(disk string) (image string, values map[uint8]string, ok bool, err error) {
	f, err := os.Open(disk)
	if err != nil {
		return "", nil, false, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", nil, false, err
	}
	gpt, err := disksafe.ReadGPT(f, size, 512)
	if errors.Is(err, disksafe.ErrNoGPT) || err == nil && len(gpt.Partitions) != 4 {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	read := func(p disksafe.Partition) (string, error) {
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, p.FirstLBA*512); err != nil {
			return "", err
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	esp, err := read(gpt.Partitions[0])
	if err != nil || !strings.HasPrefix(esp, imageMark) {
		return "", nil, false, err
	}
	image = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(esp, imageMark), "image "))
	m, err := read(gpt.Partitions[1])
	if err != nil || !strings.HasPrefix(m, metaMark) {
		return image, nil, false, err
	}
	values = map[uint8]string{}
	for _, l := range strings.Split(strings.TrimSpace(strings.TrimPrefix(m, metaMark)), "\n") {
		k, v, _ := strings.Cut(l, " ")
		key, err := strconv.ParseUint(k, 0, 8)
		if err != nil {
			return image, nil, false, fmt.Errorf("META line %q: %w", l, err)
		}
		values[uint8(key)] = v
	}
	return image, values, true, nil
}

// efivarsDir is where efibootmgr finds the EFI variables, in the machine's
// view (the fake efivarfs machine-enter binds there).
const efivarsDir = "/sys/firmware/efi/efivars"

// globalVariable is the vendor GUID of the UEFI boot manager's variables.
const globalVariable = "8be4df61-93ca-11d2-aa0d-00e098032b8c"

// efiAttrs are the attributes of the boot manager's variables:
// non-volatile, boot service and runtime access.
const efiAttrs = 0x7

// efibootmgrMain is efibootmgr over the EFI variables in dir, for what
// next-boot asks of it: -v, --bootnext N, --bootnum N --delete-bootnum, and
// --create-only --disk D --part P --loader L --label X (reading the disk's
// GPT for the partition's GUID and extent, as efibootmgr does). It prints
// as efibootmgr 17 does.
func efibootmgrMain(args []string) int {
	nv := nvram{dir: efivarsDir}
	err := nv.run(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "efibootmgr: %v\n", err)
		return 1
	}
	out, err := nv.print()
	if err != nil {
		fmt.Fprintf(os.Stderr, "efibootmgr: %v\n", err)
		return 1
	}
	fmt.Print(out)
	return 0
}

// nvram is a directory of EFI variables in efivarfs's format: each file
// named NAME-GUID, holding the variable's attributes (4 bytes, little
// endian) and then its data.
type nvram struct{ dir string }

func (n nvram) path(name string) string { return filepath.Join(n.dir, name+"-"+globalVariable) }

func (n nvram) get(name string) ([]byte, error) {
	b, err := os.ReadFile(n.path(name))
	if err != nil {
		return nil, err
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("%s: %d bytes", name, len(b))
	}
	return b[4:], nil
}

func (n nvram) set(name string, data []byte) error {
	b := binary.LittleEndian.AppendUint32(nil, efiAttrs)
	return os.WriteFile(n.path(name), append(b, data...), 0o644)
}

func (n nvram) u16s(name string) ([]uint16, error) {
	b, err := n.get(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out, nil
}

func (n nvram) setU16s(name string, v []uint16) error {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return n.set(name, b)
}

// entries returns the boot entries' numbers, in order.
func (n nvram) entries() ([]uint16, error) {
	des, err := os.ReadDir(n.dir)
	if err != nil {
		return nil, err
	}
	var nums []uint16
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), "-"+globalVariable)
		if !ok || len(name) != 8 || !strings.HasPrefix(name, "Boot") {
			continue
		}
		if v, err := strconv.ParseUint(name[4:], 16, 16); err == nil {
			nums = append(nums, uint16(v))
		}
	}
	slices.Sort(nums)
	return nums, nil
}

func (n nvram) run(args []string) error {
	num := func(s string) (uint16, error) {
		v, err := strconv.ParseUint(s, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("invalid boot number %q", s)
		}
		if _, err := n.get(fmt.Sprintf("Boot%04X", v)); err != nil {
			return 0, fmt.Errorf("Boot%04X does not exist", v)
		}
		return uint16(v), nil
	}
	switch {
	case len(args) == 1 && args[0] == "-v":
		return nil
	case len(args) == 2 && args[0] == "--bootnext":
		v, err := num(args[1])
		if err != nil {
			return fmt.Errorf("could not set BootNext: %w", err)
		}
		return n.setU16s("BootNext", []uint16{v})
	case len(args) == 3 && args[0] == "--bootnum" && args[2] == "--delete-bootnum":
		v, err := num(args[1])
		if err != nil {
			return err
		}
		order, err := n.u16s("BootOrder")
		if err != nil {
			return err
		}
		if err := n.setU16s("BootOrder", slices.DeleteFunc(order, func(x uint16) bool { return x == v })); err != nil {
			return err
		}
		return os.Remove(n.path(fmt.Sprintf("Boot%04X", v)))
	case len(args) == 9 && args[0] == "--create-only" && args[1] == "--disk" && args[3] == "--part" && args[5] == "--loader" && args[7] == "--label":
		part, err := strconv.Atoi(args[4])
		if err != nil {
			return fmt.Errorf("invalid partition number %q", args[4])
		}
		hd, err := hdNode(args[2], part)
		if err != nil {
			return fmt.Errorf("could not prepare Boot variable: %w", err)
		}
		nums, err := n.entries()
		if err != nil {
			return err
		}
		free := uint16(0)
		for slices.Contains(nums, free) {
			free++
		}
		return n.set(fmt.Sprintf("Boot%04X", free), loadOption(args[8], append(hd, fileNode(args[6])...)))
	}
	return fmt.Errorf("unexpected arguments %q", args)
}

// print prints the boot manager's state as efibootmgr 17 -v does.
func (n nvram) print() (string, error) {
	var b strings.Builder
	one := func(name string) error {
		v, err := n.u16s(name)
		if err == nil && len(v) > 0 {
			fmt.Fprintf(&b, "%s: %04X\n", name, v[0])
		}
		return err
	}
	if err := one("BootCurrent"); err != nil {
		return "", err
	}
	if err := one("BootNext"); err != nil {
		return "", err
	}
	b.WriteString("Timeout: 1 seconds\n")
	order, err := n.u16s("BootOrder")
	if err != nil {
		return "", err
	}
	var words []string
	for _, o := range order {
		words = append(words, fmt.Sprintf("%04X", o))
	}
	fmt.Fprintf(&b, "BootOrder: %s\n", strings.Join(words, ","))
	nums, err := n.entries()
	if err != nil {
		return "", err
	}
	for _, num := range nums {
		data, err := n.get(fmt.Sprintf("Boot%04X", num))
		if err != nil {
			return "", err
		}
		active, label, path, err := parseLoadOption(data)
		if err != nil {
			return "", fmt.Errorf("Boot%04X: %w", num, err)
		}
		star := " "
		if active {
			star = "*"
		}
		fmt.Fprintf(&b, "Boot%04X%s %s\t%s\n", num, star, label, path)
	}
	return b.String(), nil
}

// loadOption is an active EFI_LOAD_OPTION with its description and device
// path (an end node is added).
func loadOption(label string, path []byte) []byte {
	path = append(path, 0x7f, 0xff, 4, 0)
	b := binary.LittleEndian.AppendUint32(nil, 1) // LOAD_OPTION_ACTIVE
	b = binary.LittleEndian.AppendUint16(b, uint16(len(path)))
	b = append(b, ucs2(label)...)
	return append(b, path...)
}

func ucs2(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return append(b, 0, 0)
}

// hdNode is the device path node of partition part of the GPT on disk.
func hdNode(disk string, part int) ([]byte, error) {
	f, err := os.Open(disk)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	gpt, err := disksafe.ReadGPT(f, size, 512)
	if err != nil {
		return nil, err
	}
	for _, p := range gpt.Partitions {
		if p.Index == part {
			b := []byte{4, 1, 42, 0}
			b = binary.LittleEndian.AppendUint32(b, uint32(part))
			b = binary.LittleEndian.AppendUint64(b, uint64(p.FirstLBA))
			b = binary.LittleEndian.AppendUint64(b, uint64(p.LastLBA-p.FirstLBA+1))
			b = append(b, p.ID[:]...)
			return append(b, 2, 2), nil // GPT, GUID signature
		}
	}
	return nil, fmt.Errorf("%s has no partition %d", disk, part)
}

func fileNode(path string) []byte {
	s := ucs2(path)
	return append([]byte{4, 4, byte(4 + len(s)), byte((4 + len(s)) >> 8)}, s...)
}

// macNode is a MAC address node, as a network boot entry's.
func macNode(mac []byte) []byte {
	b := []byte{3, 11, 37, 0}
	b = append(b, make([]byte, 32)...)
	copy(b[4:], mac)
	return append(b, 1) // ifType Ethernet
}

// parseLoadOption reads an EFI_LOAD_OPTION, with its device path as
// efibootmgr 17 prints it.
func parseLoadOption(b []byte) (active bool, label, path string, err error) {
	if len(b) < 6 {
		return false, "", "", errors.New("short load option")
	}
	active = binary.LittleEndian.Uint32(b)&1 != 0
	plen := int(binary.LittleEndian.Uint16(b[4:]))
	rest := b[6:]
	var units []uint16
	for {
		if len(rest) < 2 {
			return false, "", "", errors.New("unterminated description")
		}
		u := binary.LittleEndian.Uint16(rest)
		rest = rest[2:]
		if u == 0 {
			break
		}
		units = append(units, u)
	}
	label = string(utf16.Decode(units))
	if plen > len(rest) {
		return false, "", "", errors.New("device path past the end")
	}
	dp := rest[:plen]
	var nodes []string
	for len(dp) >= 4 {
		typ, sub, n := dp[0], dp[1], int(binary.LittleEndian.Uint16(dp[2:]))
		if n < 4 || n > len(dp) {
			return false, "", "", errors.New("bad device path node")
		}
		node := dp[:n]
		dp = dp[n:]
		switch {
		case typ == 0x7f && sub == 0xff:
			dp = nil
		case typ == 4 && sub == 1 && n == 42:
			var g disksafe.GUID
			copy(g[:], node[24:40])
			nodes = append(nodes, fmt.Sprintf("HD(%d,GPT,%s,%#x,%#x)", binary.LittleEndian.Uint32(node[4:]),
				g, binary.LittleEndian.Uint64(node[8:]), binary.LittleEndian.Uint64(node[16:])))
		case typ == 4 && sub == 4:
			var u []uint16
			for i := 4; i+1 < n; i += 2 {
				if c := binary.LittleEndian.Uint16(node[i:]); c != 0 {
					u = append(u, c)
				}
			}
			nodes = append(nodes, "File("+string(utf16.Decode(u))+")")
		case typ == 3 && sub == 11 && n == 37:
			nodes = append(nodes, fmt.Sprintf("MAC(%x,%d)", node[4:10], node[36]))
		default:
			nodes = append(nodes, fmt.Sprintf("Path(%d,%d,%x)", typ, sub, node[4:]))
		}
	}
	return active, label, strings.Join(nodes, "/"), nil
}
