package dockertest

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// syslogSink receives the syslog messages (RFC 5424) of dockerd's syslog
// log driver on a unix datagram socket, one per line a container printed.
type syslogSink struct {
	conn *net.UnixConn
	path string
	wg   sync.WaitGroup
}

// listenSyslog listens on path and writes each container line it receives
// to out as "<container name>: <line>\n".
func listenSyslog(path string, out io.Writer) (*syslogSink, error) {
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("listen for the containers' output: %w", err)
	}
	s := &syslogSink{conn: conn, path: path}
	s.wg.Go(func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if name, line, ok := parseSyslog(string(buf[:n])); ok {
				fmt.Fprintf(out, "%s: %s\n", name, line)
			}
		}
	})
	return s, nil
}

// args returns dockerd's flags that send every container's output to s,
// tagged with the container's name.
func (s *syslogSink) args() []string {
	return []string{
		"--log-driver", "syslog",
		"--log-opt", "syslog-address=unixgram://" + s.path,
		"--log-opt", "syslog-format=rfc5424",
		"--log-opt", "tag={{.Name}}",
	}
}

// close stops receiving, once dockerd, which sends, has stopped.
func (s *syslogSink) close() {
	s.conn.Close()
	s.wg.Wait()
}

// parseSyslog returns the app name (the container's name) and the message
// of an RFC 5424 message, "<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG",
// without a line end.
func parseSyslog(m string) (app, msg string, ok bool) {
	f := strings.SplitN(m, " ", 8)
	if len(f) < 7 || !strings.HasPrefix(f[0], "<") {
		return "", "", false
	}
	if len(f) == 8 {
		msg = f[7]
	}
	return f[3], strings.TrimRight(msg, "\r\n"), true
}
