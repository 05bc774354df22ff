package firmware

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"

	"github.com/fleetkit/fleet/examples/internal/firmware/talosdisk"
	"github.com/fleetkit/fleet/examples/internal/machinetest"
)

// forward serves on listen (an address of the test's end of the uplink)
// and joins each connection to to (tink-server on the test's loopback),
// until t ends: plumbing in place of a provisioning network, by which the
// machines reach tink-server. It returns the address it serves on. When t
// ends it closes the connections it joined: a VM killed mid-stream sends
// no FIN, and its side would be read, or its unacknowledged bytes sent
// again, for as long as TCP tries (seen: a test's clean-up waiting 16
// minutes on an agent's stream to tink-server).
func forward(t *testing.T, listen, to string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !track(c) {
				return
			}
			wg.Go(func() {
				defer c.Close()
				d, err := net.DialTimeout("tcp", to, 10*time.Second)
				if err != nil || !track(d) {
					return
				}
				defer d.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(d, c); d.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				go func() { io.Copy(c, d); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				<-done
				<-done
			})
		}
	})
	return ln.Addr().String()
}

// waitEnded waits until Workflow name ended (SUCCESS, FAILED, TIMEOUT): the
// controller moves it from POST to SUCCESS after the last report. It fails
// t when it stands still for a minute.
func waitEnded(ctx context.Context, t *testing.T, tink dynamic.Interface, ns, name string) tinkerbell.Workflow {
	t.Helper()
	var (
		wf    tinkerbell.Workflow
		last  tinkerbell.WorkflowState
		moved = time.Now()
	)
	for {
		var err error
		wf, err = machinetest.GetWorkflow(ctx, tink, ns, name)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if machinetest.Ended(wf) {
			return wf
		}
		if wf.Status.State != last {
			last, moved = wf.Status.State, time.Now()
		}
		if time.Since(moved) > time.Minute {
			t.Fatalf("Workflow %s stood still in state %q for a minute (read error %v)", name, last, err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// diskSize is the size of every disk of a machine but its boot disk.
const diskSize = 64 << 20

// oldInstall makes the install disk: an old install on it, a GPT of two
// partitions, so that the installer, which installs only to an empty disk,
// can install only after wipe-disk wiped it.
func oldInstall(t *testing.T, tl tools, dir string) string {
	t.Helper()
	p := emptyDisk(t, dir, "install.img")
	sf := exec.Command(tl.sfdisk, "-q", p)
	sf.Stdin = strings.NewReader("label: gpt\nsize=16MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=old-efi\ntype=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=old-root\n")
	if out, err := sf.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk %s: %v: %s", p, err, out)
	}
	return p
}

// decoyStream is the decoy's contents: seed's ChaCha8 stream.
func decoyStream(seed uint64) io.Reader {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return io.LimitReader(rand.NewChaCha8(s), diskSize)
}

// decoyDisk makes the decoy: a disk filled with seed's stream.
func decoyDisk(t *testing.T, dir string, seed uint64) string {
	t.Helper()
	p := dir + "/decoy.img"
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, decoyStream(seed)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// sameBytes compares the file p with r byte for byte, and says where they
// first differ.
func sameBytes(p string, r io.Reader) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; off += int64(len(a)) {
		n, errA := io.ReadFull(f, a)
		m, errB := io.ReadFull(r, b)
		if n != m {
			return fmt.Errorf("it holds %d bytes, want %d", off+int64(n), off+int64(m))
		}
		if i := firstDiff(a[:n], b[:m]); i >= 0 {
			return fmt.Errorf("it differs at byte %d", off+int64(i))
		}
		if errA != nil || errB != nil {
			if errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF) {
				return nil
			}
			return errors.Join(errA, errB)
		}
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// installed reads the install disk as the installed system reads it.
func installed(t *testing.T, p string) (talosdisk.Disk, error) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return talosdisk.Read(f, diskSize)
}
