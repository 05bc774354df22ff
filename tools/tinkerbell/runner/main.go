package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tinkerbell/tinkerbell/pkg/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// actionPath is the PATH of every action: a Debian-like image's.
const actionPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// waitdaemon is the word of the images file for the waitdaemon stand-in.
const waitdaemon = "waitdaemon"

// retryEvery is how long the runner waits between two asks that found no
// action.
const retryEvery = time.Second

func main() {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(shimMain(os.Args[2:], os.Stderr))
	}
	if filepath.Base(os.Args[0]) == "docker" {
		os.Exit(dockerMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(runnerMain(os.Args[1:], os.Stdout, os.Stderr))
}

func say(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "runner: "+format+"\n", args...)
}

func runnerMain(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("runner", flag.ContinueOnError)
	fl.SetOutput(stderr)
	server := fl.String("server", "", "tink-server's gRPC address, HOST:PORT (required)")
	id := fl.String("id", "", "the worker ID (default: the MAC address of -interface)")
	iface := fl.String("interface", "", "the interface whose MAC address is the worker ID")
	imagesFile := fl.String("images", "", "the file of IMAGE PROGRAM lines (required)")
	wait := fl.Duration("wait", 20*time.Second, "how long tink-server may have no action before the runner stops")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *server == "" || *imagesFile == "" || (*id == "") == (*iface == "") || fl.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: runner -server HOST:PORT (-id ID | -interface IF) -images FILE [-wait D]")
		return 2
	}
	images, err := readImages(*imagesFile)
	if err != nil {
		say(stderr, "%v", err)
		return 2
	}
	if *id == "" {
		i, err := net.InterfaceByName(*iface)
		if err != nil {
			say(stderr, "the worker ID: %v", err)
			return 2
		}
		*id = i.HardwareAddr.String()
	}
	conn, err := grpc.NewClient(*server, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		say(stderr, "tink-server %s: %v", *server, err)
		return 1
	}
	defer conn.Close()
	r := &runner{
		client: proto.NewWorkflowServiceClient(conn),
		id:     *id,
		images: images,
		wait:   *wait,
		out:    stdout,
	}
	say(stdout, "worker %s asks tink-server %s for actions", r.id, *server)
	code := r.run(context.Background())
	if r.later != nil {
		r.later()
	}
	return code
}

// readImages reads the images file: image -> program.
func readImages(name string) (map[string]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 || (f[1] != waitdaemon && !filepath.IsAbs(f[1])) {
			return nil, fmt.Errorf("%s:%d: %q is not IMAGE PROGRAM (an absolute path, or waitdaemon)", name, n, l)
		}
		m[f[0]] = f[1]
	}
	return m, sc.Err()
}

// runner runs one worker's actions.
type runner struct {
	client proto.WorkflowServiceClient
	id     string
	images map[string]string
	wait   time.Duration
	out    io.Writer
	later  func()    // what a waitdaemon action runs after the run
	at     time.Time // when later runs; the run ends then
}

// run asks for actions and runs them until one does not succeed, or none
// comes for r.wait.
func (r *runner) run(ctx context.Context) int {
	idleSince := time.Now()
	for {
		stop := idleSince.Add(r.wait)
		if !r.at.IsZero() && r.at.Before(stop) {
			stop = r.at
		}
		left := time.Until(stop)
		if left <= 0 {
			if r.at.IsZero() {
				say(r.out, "no action for %s for %v; stopping", r.id, r.wait)
			}
			return 0
		}
		actx, cancel := context.WithTimeout(ctx, left)
		a, err := r.client.GetAction(actx, &proto.ActionRequest{AgentId: &r.id})
		cancel()
		switch status.Code(err) {
		case codes.OK:
		case codes.NotFound, codes.FailedPrecondition, codes.DeadlineExceeded:
			// No Workflow, or none runnable, yet or any more.
			time.Sleep(min(retryEvery, max(0, time.Until(stop))))
			continue
		default:
			say(r.out, "tink-server: %v", err)
			if ctx.Err() != nil || time.Since(idleSince) > r.wait {
				return 1
			}
			time.Sleep(retryEvery)
			continue
		}
		if !r.do(ctx, a) {
			return 1
		}
		idleSince = time.Now()
	}
}

// do runs one action and reports it; it returns whether it succeeded.
func (r *runner) do(ctx context.Context, a *proto.ActionResponse) bool {
	say(r.out, "action %s (%s) of Workflow %s", a.GetName(), a.GetImage(), a.GetWorkflowId())
	if err := r.report(ctx, a, proto.ActionStatusRequest_RUNNING, "running action", time.Now(), time.Time{}); err != nil {
		say(r.out, "report %s RUNNING: %v", a.GetName(), err)
		return false
	}
	start := time.Now()
	state := proto.ActionStatusRequest_SUCCESS
	err := r.execute(ctx, a)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		state = proto.ActionStatusRequest_TIMEOUT
	case err != nil:
		state = proto.ActionStatusRequest_FAILED
	}
	stop := time.Now()
	if err != nil {
		say(r.out, "action %s: %v", a.GetName(), err)
	}
	// The agent retries the final report until it lands: tink-server does
	// not serve the action again once it moved past it.
	for try := 1; ; try++ {
		rerr := r.report(ctx, a, state, "action completed", start, stop)
		if rerr == nil {
			break
		}
		if c := status.Code(rerr); c == codes.NotFound || c == codes.InvalidArgument || c == codes.FailedPrecondition || try == 30 {
			say(r.out, "report %s %s: %v", a.GetName(), state, rerr)
			return false
		}
		time.Sleep(retryEvery)
	}
	say(r.out, "action %s %s after %v", a.GetName(), state, stop.Sub(start).Round(time.Millisecond))
	return state == proto.ActionStatusRequest_SUCCESS
}

func (r *runner) report(ctx context.Context, a *proto.ActionResponse, st proto.ActionStatusRequest_StateType, msg string, start, stop time.Time) error {
	wf, task, id, name := a.GetWorkflowId(), a.GetTaskId(), a.GetActionId(), a.GetName()
	req := &proto.ActionStatusRequest{
		WorkflowId:  &wf,
		AgentId:     &r.id,
		TaskId:      &task,
		ActionId:    &id,
		ActionName:  &name,
		ActionState: &st,
		Message:     &proto.ActionMessage{Message: &msg},
	}
	if !start.IsZero() {
		req.ExecutionStart = timestamppb.New(start.UTC())
	}
	if !stop.IsZero() {
		req.ExecutionStop = timestamppb.New(stop.UTC())
		d := stop.Sub(start).Round(time.Millisecond).String()
		req.ExecutionDuration = &d
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := r.client.ReportActionStatus(rctx, req)
	return err
}

// execute runs the action's program in a container of its own (see
// container) with the action's environment, volumes and timeout.
func (r *runner) execute(ctx context.Context, a *proto.ActionResponse) error {
	prog, ok := r.images[a.GetImage()]
	if !ok {
		return fmt.Errorf("runner: no program for image %s", a.GetImage())
	}
	env := []string{actionPath}
	env = append(env, a.GetEnvironment()...)
	if prog == waitdaemon {
		return r.waitdaemon(env, a.GetCommand())
	}
	vols, err := parseVolumes(withoutEngine(a.GetVolumes()))
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	if t := a.GetTimeout(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Second)
		defer cancel()
	}
	cmd := container(ctx, "/", vols, prog, a.GetCommand())
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = r.out, r.out
	err = cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// withoutEngine leaves out the volumes of the engine's socket (a host
// path ending docker.sock): the docker stand-in is the engine.
func withoutEngine(volumes []string) []string {
	return slices.DeleteFunc(slices.Clone(volumes), func(v string) bool {
		host, _, _ := strings.Cut(v, ":")
		return strings.HasSuffix(host, "docker.sock")
	})
}

// waitdaemon stands in for the waitdaemon image: it succeeds at once, and
// runs the command WAIT_SECONDS later, once the run's reports are in.
func (r *runner) waitdaemon(env, command []string) error {
	wait := 10 * time.Second
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "WAIT_SECONDS="); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("waitdaemon: WAIT_SECONDS=%q is not a number of seconds", v)
			}
			wait = time.Duration(n) * time.Second
		}
	}
	if len(command) != 1 || command[0] != "reboot" {
		return fmt.Errorf("waitdaemon: the stand-in runs only reboot, not %q", command)
	}
	r.at = time.Now().Add(wait)
	say(r.out, "waitdaemon: reboot in %v", wait)
	r.later = func() {
		time.Sleep(time.Until(r.at))
		say(r.out, "waitdaemon: rebooting")
		if err := reboot(); err != nil {
			say(r.out, "waitdaemon: reboot: %v", err)
		}
	}
	return nil
}
