package e2e

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// notifySocket is what systemd listens on for a Type=notify service
// (deploy/systemd): a unix datagram socket named by NOTIFY_SOCKET.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{path: path, conn: conn}
}

// expect reads datagrams until one holds want, failing after 30s.
func (n *notifySocket) expect(t *testing.T, who, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	buf := make([]byte, 4096)
	var got []string
	for {
		_ = n.conn.SetReadDeadline(deadline)
		k, err := n.conn.Read(buf)
		if err != nil {
			t.Fatalf("%s sent %q to NOTIFY_SOCKET, never %s: %v", who, got, want, err)
		}
		msg := string(buf[:k])
		got = append(got, msg)
		if strings.Contains("\n"+msg+"\n", "\n"+want+"\n") {
			return
		}
	}
}

// Both daemons speak systemd's notify protocol: READY=1 once the control
// plane serves and once the node has joined, STOPPING=1 on SIGTERM.
func TestDaemonsNotifySystemd(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	dataDir, addr := t.TempDir(), freeAddr(t)
	cpSock, nodeSock := listenNotify(t), listenNotify(t)
	cp := testharness.StartProcEnv(t, []string{"NOTIFY_SOCKET=" + cpSock.path}, filepath.Join(bins, "controlplane"),
		"--data-dir", dataDir, "--listen", addr, "--metrics-listen", "", "--log-format", "json")
	cpSock.expect(t, "controlplane", "READY=1")

	node := testharness.StartProcEnv(t, []string{"NOTIFY_SOCKET=" + nodeSock.path}, filepath.Join(bins, "node"),
		"--controlplane", addr, "--data-dir", filepath.Join(dataDir, "node"), "--name", "n1", "--cast-bin", "",
		"--agents-config", missingAgentsConfig(t))
	nodeSock.expect(t, "node", "READY=1")
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr}}
	c.waitNode("n1", true) // ready means joined: the control plane knows it

	node.Signal(syscall.SIGTERM)
	nodeSock.expect(t, "node", "STOPPING=1")
	if code, ok := node.Wait(30 * time.Second); !ok || code != 0 {
		t.Errorf("node after SIGTERM: exit %d (exited %v)", code, ok)
	}
	cp.Signal(syscall.SIGTERM)
	cpSock.expect(t, "controlplane", "STOPPING=1")
	if code, ok := cp.Wait(30 * time.Second); !ok || code != 0 {
		t.Errorf("controlplane after SIGTERM: exit %d (exited %v)", code, ok)
	}
}
