//go:build cgo

package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
)

// serveTPM serves the reference simulator on a unix socket, one connection
// at a time, as swtpm's command server does: each command read whole from
// the stream, each response written back in two pieces, so that the agent
// must put responses together itself.
func serveTPM(t *testing.T, sock string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := attesttest.OpenSimulator(0)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
		sim.Close()
	})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			for {
				hdr := make([]byte, 10)
				if _, err := io.ReadFull(conn, hdr); err != nil {
					break
				}
				cmd := make([]byte, binary.BigEndian.Uint32(hdr[2:6]))
				copy(cmd, hdr)
				if _, err := io.ReadFull(conn, cmd[10:]); err != nil {
					break
				}
				if _, err := sim.Write(cmd); err != nil {
					break
				}
				rsp := make([]byte, 1<<16)
				n, err := sim.Read(rsp)
				if err != nil {
					break
				}
				conn.Write(rsp[:n/2])
				conn.Write(rsp[n/2 : n])
			}
			conn.Close()
		}
	}()
}

func TestTPMServerSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "tpm.sock")
	serveTPM(t, sock)
	for i := range 2 { // a closed connection leaves the server to the next
		dev, err := openTPM(sock)
		if err != nil {
			t.Fatalf("openTPM(%s): %v", sock, err)
		}
		eks, err := dev.EKs()
		if err != nil {
			dev.Close()
			t.Fatalf("EKs over the socket: %v", err)
		}
		h, err := attest.EKHash(eks[0].Public)
		if err != nil || h != attesttest.RSASeed0Hash {
			t.Errorf("open %d: the RSA EK hash is %s (%v), want the simulator's %s", i, h, err, attesttest.RSASeed0Hash)
		}
		if err := dev.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestTPMServerGone(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "tpm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the socket file stays, and nothing listens on it
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the socket file: %v, %v", fi, err)
	}
	_, err = openTPM(sock)
	var op *net.OpError
	if !errors.Is(err, attest.ErrTPM) || !errors.As(err, &op) {
		t.Errorf("openTPM of a socket nobody listens on = %v, want attest.ErrTPM and the dial's error", err)
	}
}
