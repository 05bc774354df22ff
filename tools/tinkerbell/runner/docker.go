package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The docker stand-in's store of images, and where it records the images
// pulled in this boot.
const (
	defaultStore = "/var/lib/fleet-images"
	pulledDir    = "/run/docker-standin"
)

// docker's exit code when the engine, not the container, failed.
const dockerFailed = 125

// dockerMain is the docker stand-in (see the package doc).
func dockerMain(args []string, stdout, stderr io.Writer) int {
	store := os.Getenv("DOCKER_STANDIN_STORE")
	if store == "" {
		store = defaultStore
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "docker (stand-in): usage: docker pull IMAGE | docker run [OPTIONS] IMAGE [ARG...]")
		return dockerFailed
	}
	switch args[0] {
	case "pull":
		if len(args) != 2 {
			fmt.Fprintln(stderr, `"docker pull" requires exactly 1 argument.`)
			return 1
		}
		return dockerPull(store, args[1], stdout, stderr)
	case "run":
		return dockerRun(store, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "docker (stand-in): %q is not a command the stand-in knows (pull, run)\n", args[0])
	return dockerFailed
}

// imageDir is where the store holds image.
func imageDir(store, image string) (string, error) {
	if image == "" || strings.Contains(image, "..") || strings.HasPrefix(image, "/") {
		return "", fmt.Errorf("invalid reference format: %q", image)
	}
	return filepath.Join(store, image), nil
}

// pulledMark is the file that records image as pulled in this boot.
func pulledMark(image string) string {
	sum := sha256.Sum256([]byte(image))
	return filepath.Join(pulledDir, hex.EncodeToString(sum[:]))
}

func dockerPull(store, image string, stdout, stderr io.Writer) int {
	dir, err := imageDir(store, image)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 1
	}
	if fi, err := os.Stat(filepath.Join(dir, "rootfs")); err != nil || !fi.IsDir() {
		repo, _, _ := strings.Cut(image, ":")
		fmt.Fprintf(stderr, "Error response from daemon: pull access denied for %s, repository does not exist or may require 'docker login'\n", repo)
		return 1
	}
	if err := os.MkdirAll(pulledDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "Error response from daemon: %v\n", err)
		return 1
	}
	if err := os.WriteFile(pulledMark(image), []byte(image+"\n"), 0o644); err != nil {
		fmt.Fprintf(stderr, "Error response from daemon: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Status: Downloaded newer image for %s\n%s\n", image, image)
	return 0
}

// runOptions are docker run's options the stand-in takes.
type runOptions struct {
	pull       string
	volumes    []string
	env        []string
	entrypoint string
	image      string
	args       []string
}

// parseRun reads docker run's arguments.
func parseRun(args []string) (runOptions, error) {
	o := runOptions{pull: "missing"}
	value := func(i *int, flag string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("flag needs an argument: %s", flag)
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			o.image, o.args = a, args[i+1:]
			return o, nil
		}
		name, v, inline := strings.Cut(a, "=")
		get := func() (string, error) {
			if inline {
				return v, nil
			}
			return value(&i, name)
		}
		var err error
		switch name {
		case "--rm", "--privileged":
		case "--pull":
			o.pull, err = get()
			if err == nil && !slices.Contains([]string{"never", "missing", "always"}, o.pull) {
				err = fmt.Errorf("invalid pull option: %q", o.pull)
			}
		case "--network", "--net", "--pid":
			var ns string
			ns, err = get()
			if err == nil && ns != "host" {
				err = fmt.Errorf("the stand-in has only the host's namespaces, not %s %s", name, ns)
			}
		case "--volume", "-v":
			var vol string
			vol, err = get()
			o.volumes = append(o.volumes, vol)
		case "--env", "-e":
			var kv string
			kv, err = get()
			o.env = append(o.env, kv)
		case "--entrypoint":
			o.entrypoint, err = get()
		default:
			err = fmt.Errorf("unknown flag: %s", name)
		}
		if err != nil {
			return o, err
		}
	}
	return o, errors.New(`"docker run" requires at least 1 argument`)
}

func dockerRun(store string, args []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args)
	if err != nil {
		fmt.Fprintf(stderr, "docker (stand-in): %v\n", err)
		return dockerFailed
	}
	vols, err := parseVolumes(o.volumes)
	if err != nil {
		fmt.Fprintf(stderr, "docker: %v\n", err)
		return dockerFailed
	}
	dir, err := imageDir(store, o.image)
	if err != nil {
		fmt.Fprintf(stderr, "docker: %v\n", err)
		return dockerFailed
	}
	if _, err := os.Stat(pulledMark(o.image)); err != nil {
		if o.pull == "never" {
			fmt.Fprintf(stderr, "docker: Error response from daemon: No such image: %s\n", o.image)
			return dockerFailed
		}
		if code := dockerPull(store, o.image, io.Discard, stderr); code != 0 {
			return dockerFailed
		}
	}
	rootfs := filepath.Join(dir, "rootfs")
	env, err := readEnvFile(filepath.Join(dir, "env"))
	if err != nil {
		fmt.Fprintf(stderr, "docker: image %s: %v\n", o.image, err)
		return dockerFailed
	}
	for _, kv := range o.env {
		if !strings.Contains(kv, "=") {
			v, ok := os.LookupEnv(kv)
			if !ok {
				continue
			}
			kv += "=" + v
		}
		env = append(env, kv)
	}
	entry := o.entrypoint
	if entry == "" {
		b, err := os.ReadFile(filepath.Join(dir, "entrypoint"))
		if err != nil {
			fmt.Fprintf(stderr, "docker: image %s has no entrypoint: %v\n", o.image, err)
			return dockerFailed
		}
		entry = strings.TrimSpace(string(b))
	}
	cmd := container(context.Background(), rootfs, vols, entry, o.args)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintf(stderr, "docker: Error response from daemon: failed to start %s: %v\n", entry, err)
		return dockerFailed
	}
	return 0
}

// readEnvFile reads KEY=VALUE lines; a missing file is no variables.
func readEnvFile(name string) ([]string, error) {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if !strings.Contains(l, "=") {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", name, l)
		}
		env = append(env, l)
	}
	return env, sc.Err()
}
