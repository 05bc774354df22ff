package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/meta"
)

// defaultCommand runs the class's Talos installer in the host's Docker as
// Talos runs it for an install: privileged, in the host's network and PID
// namespaces, with the host's /dev, and only from the image wipe-disk
// pulled into the cache in this boot.
const defaultCommand = "docker run --rm --pull never --privileged --network host --pid host " +
	"--volume /dev:/dev --env " + metaEnv + " --entrypoint /bin/installer " +
	"{image} install --disk {disk} --platform metal"

// metaEnv is the Talos installer's variable for META values
// (constants.MetaValuesEnvVar), which the docker CLI passes on by name.
const metaEnv = "INSTALLER_META_BASE64"

// placeholder matches what looks like a placeholder in a command's word.
var placeholder = regexp.MustCompile(`\{[A-Za-z_]*\}`)

// stopGrace is how long the installer has to stop after the action is
// stopped, before it is killed.
const stopGrace = 30 * time.Second

// commandInstaller runs the installer command. It is an installer. It is
// not safe for concurrent use.
type commandInstaller struct {
	words       []string // with their placeholders
	image       string
	urlTemplate string   // CONFIG_URL_TEMPLATE: the config URL with {code}
	configURL   string   // urlTemplate with the code (setCode)
	env         []string // added to the action's own environment (setCode)
}

// newCommandInstaller splits command on blanks ("" is defaultCommand) and
// checks its placeholders, which Install fills in. urlTemplate is fleetd's
// config URL with {code} where the code goes, for {config_url}; "" when the
// command names no {config_url}.
func newCommandInstaller(command, image, urlTemplate string) (*commandInstaller, error) {
	if strings.TrimSpace(command) == "" {
		command = defaultCommand
	}
	if urlTemplate != "" && !strings.Contains(urlTemplate, "{code}") {
		return nil, errors.New(`CONFIG_URL_TEMPLATE has no "{code}"`)
	}
	words := strings.Fields(command)
	for _, w := range words {
		for _, p := range placeholder.FindAllString(w, -1) {
			switch p {
			case "{image}", "{disk}":
			case "{config_url}":
				if urlTemplate == "" {
					return nil, errors.New("the install command names {config_url}, and CONFIG_URL_TEMPLATE is not set")
				}
			default:
				return nil, fmt.Errorf("the install command names %s; it may name {image}, {disk} and {config_url}", p)
			}
		}
	}
	return &commandInstaller{words: words, image: image, urlTemplate: urlTemplate}, nil
}

// setCode gives the installer the install code of this boot's record: in
// the command's environment as META key 0xb (DownloadURLCode), the ${code}
// of Talos's talos.config= URL, and in {config_url}.
func (c *commandInstaller) setCode(code string) {
	c.env = []string{metaEnv + "=" + meta.Values{{Key: meta.DownloadURLCode, Value: code}}.Encode(false)}
	c.configURL = strings.ReplaceAll(c.urlTemplate, "{code}", code)
}

// Install runs the command with its placeholders filled in, and hands
// output each line it prints, stdout and stderr alike. Stopping ctx sends
// the command and what it started SIGTERM (docker run passes it on to the
// installer), and the command SIGKILL after stopGrace. Its error never holds the command's arguments, which may hold
// the config URL.
func (c *commandInstaller) Install(ctx context.Context, disk string, output func(line string)) error {
	// The values go in after the words are split, in one pass, so no value
	// adds a word and no value's braces are read as a placeholder.
	fill := strings.NewReplacer("{image}", c.image, "{disk}", disk, "{config_url}", c.configURL)
	argv := make([]string, len(c.words))
	for i, w := range c.words {
		argv[i] = fill.Replace(w)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.env...)
	stopGroup(cmd)
	cmd.WaitDelay = stopGrace
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := bufio.NewReaderSize(pr, 64<<10)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				output(line)
			}
			if err != nil {
				io.Copy(io.Discard, pr) // never block the command
				return
			}
		}
	}()
	err := cmd.Run()
	pw.Close()
	wg.Wait()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: stopped: %w", argv[0], ctx.Err())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	// It did not start: say why, without its arguments.
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", argv[0], pe.Err)
	}
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%s: %w", argv[0], exec.ErrNotFound)
	}
	return fmt.Errorf("%s did not run", argv[0])
}
