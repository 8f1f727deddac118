package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// execServer answers the API server's `pods/exec` for the simulated Node:
// the kubelet's /exec/{namespace}/{pod}/{container} streaming endpoint
// (SPDY, through the API server), running the command on this host in
// Exec.WorkDir with Exec.Env added. (kwok's own exec server crashes on a
// TTY exec without stdin, which is how the MCS conformance suite execs.)
type execServer struct {
	srv  *httptest.Server
	env  []string
	dir  string
	port int
}

func startExecServer(e *Exec) (*execServer, error) {
	s := &execServer{dir: e.WorkDir, env: os.Environ()}
	keys := make([]string, 0, len(e.Env))
	for k := range e.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.env = append(s.env, k+"="+e.Env[k])
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	// HTTPS (the API server always dials a kubelet so, and verifies
	// nothing without --kubelet-certificate-authority); HTTP/1.1 only,
	// for the SPDY upgrade.
	s.srv.StartTLS()
	s.port = ln.Addr().(*net.TCPAddr).Port
	return s, nil
}

func (s *execServer) serve(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) < 4 || parts[0] != "exec" {
		http.NotFound(w, req)
		return
	}
	pod, container := parts[2], parts[len(parts)-1]
	cmd := req.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "no command", http.StatusBadRequest)
		return
	}
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeExec(w, req, s, pod, "", container, cmd, opts, time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

// ExecInContainer implements remotecommand.Executor.
func (s *execServer) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, timeout time.Duration) error {
	if resize != nil {
		go func() {
			for range resize { // no terminal to resize
			}
		}()
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Env, c.Dir = s.env, s.dir
	if in != nil {
		c.Stdin = in
	}
	var stdout, stderr io.Writer = io.Discard, io.Discard
	if out != nil {
		stdout = out
	}
	switch {
	case errw != nil:
		stderr = errw
	case tty && out != nil:
		stderr = out // a terminal shows both
	}
	c.Stdout, c.Stderr = stdout, stderr
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return utilexec.CodeExitError{Err: fmt.Errorf("%s: %w", cmd[0], err), Code: ee.ExitCode()}
	}
	return err
}

func (s *execServer) close() {
	if s != nil {
		s.srv.Close()
	}
}
