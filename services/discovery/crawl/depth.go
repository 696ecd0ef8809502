package crawl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMessageDepth is the deepest nesting of JSON objects and arrays the
// go-sdk decodes in one JSON-RPC message (its internal limit, v1.8.0). A
// deeper message is refused by the SDK before discovery could read it: the
// tap measures the nesting on the wire so that a server sending one (say, a
// tool whose input schema nests 2,000 levels) is a content fault, QUARANTINED
// MESSAGE_TOO_DEEP, rather than a transport error retried forever.
const MaxMessageDepth = 1000

// depthMeter follows the nesting of a stream of JSON texts, skipping strings,
// across reads: it reports when one level goes beyond [MaxMessageDepth].
// Unbalanced closers (never valid JSON) do not take the depth below zero.
type depthMeter struct {
	depth            int
	inString, escape bool
}

// feed scans p and reports whether the nesting went beyond the limit.
func (d *depthMeter) feed(p []byte) (tooDeep bool) {
	for _, b := range p {
		if d.inString {
			switch {
			case d.escape:
				d.escape = false
			case b == '\\':
				d.escape = true
			case b == '"':
				d.inString = false
			}
			continue
		}
		switch b {
		case '"':
			d.inString = true
		case '{', '[':
			d.depth++
			if d.depth > MaxMessageDepth {
				tooDeep = true
			}
		case '}', ']':
			if d.depth > 0 {
				d.depth--
			}
		}
	}
	return tooDeep
}

// reset starts a new JSON text (an SSE event's data is one message).
func (d *depthMeter) reset() { *d = depthMeter{} }

// measuredReader reports to the tap when the stream it reads nests too
// deeply (stdio: newline-delimited JSON-RPC below the go-sdk's decoding).
type measuredReader struct {
	r     io.ReadCloser
	tap   *tap
	meter depthMeter
}

func (m *measuredReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 && m.meter.feed(p[:n]) {
		m.tap.tooDeep.Store(true)
	}
	return n, err
}

func (m *measuredReader) Close() error { return m.r.Close() }

// commandTransport is the go-sdk's [mcp.CommandTransport] with the child's
// stdout passing the tap's depth meter: the SDK's connection decodes the
// bytes itself, so a message too deep for it would otherwise be seen only as
// a failed call. Shutdown follows the MCP spec as the SDK's does: close
// stdin, wait, SIGTERM, wait, SIGKILL.
type commandTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
	tap       *tap
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	io := &mcp.IOTransport{
		// Closing the connection closes stdin (and waits for the process),
		// not stdout.
		Reader: &measuredReader{r: io.NopCloser(stdout), tap: t.tap},
		Writer: &childStdin{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate},
	}
	return io.Connect(ctx)
}

// childStdin closes a child's stdin and waits for it to exit, signalling it
// when it does not.
type childStdin struct {
	io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
}

func (c *childStdin) Close() error {
	if err := c.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(c.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if c.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the stdio server does not exit")
}
