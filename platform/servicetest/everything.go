package servicetest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// StartEverything runs the npm reference server-everything
// (@modelcontextprotocol/server-everything, installed by npm ci in e2e/ts;
// index is its dist/index.js) over streamable HTTP, stateful, on a
// loopback port until the test ends, and returns its MCP URL. Without the
// package the test is skipped, or fails under CI (which installs it).
func StartEverything(t testing.TB, index string) string {
	t.Helper()
	if _, err := os.Stat(index); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("e2e/ts/node_modules is missing: .ci/run installs it with npm ci")
		}
		t.Skip("server-everything is not installed: run npm ci in e2e/ts")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", index, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatal("server-everything did not start")
		}
	}
}
