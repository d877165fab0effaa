package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/fs/fusefs"
	"github.com/stripefs/stripefs/ldlm"
)

// A mount's daemon hands its live FUSE session to a new process of
// stripefs (a new binary after an upgrade) when one connects to its
// takeover socket: `stripefs mount --takeover MNT`, or SIGUSR2 to the
// daemon, which starts that itself. The new process runs the old one's
// command line again, but with the session instead of a new mount
// (fusefs/takeover.go for the kernel side).

const takeoverVersion = 2 // 2: lock waits move to the successor

// maxHandover bounds a handover's size (open handles, locks).
const maxHandover = 256 << 20

// handover is what the old daemon sends with the device.
type handover struct {
	Version  int
	Args     []string // the old daemon's command line, without the program
	Identity fs.Identity
	Session  fusefs.Session
	Flocks   []ldlm.Flock
}

// takeoverReply is the new daemon's answer.
type takeoverReply struct {
	OK  bool
	Err string
}

// errHandedOver ends a daemon whose session another process now serves:
// it exits without unmounting or saying goodbye to the servers.
var errHandedOver = errors.New("mount handed over to a new process")

// takeoverSocket is where the daemon of mount point dir listens.
func takeoverSocket(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	base := "/run/stripefs"
	if os.Geteuid() != 0 {
		base = filepath.Join(os.TempDir(), "stripefs-"+strconv.Itoa(os.Geteuid()))
	}
	return filepath.Join(base, "takeover-"+hex.EncodeToString(sum[:8])+".sock")
}

// takeoverListener accepts successors of one mount.
type takeoverListener struct {
	ln    *net.UnixListener
	path  string
	conns chan *net.UnixConn
}

// listenTakeover listens for successors of dir's daemon. Only its user
// (root) may connect: the socket's directory is its own, mode 0700.
func listenTakeover(dir string) (*takeoverListener, error) {
	path := takeoverSocket(dir)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	_ = os.Remove(path) // a daemon that died left it
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("takeover socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	t := &takeoverListener{ln: ln, path: path, conns: make(chan *net.UnixConn)}
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			t.conns <- c
		}
	}()
	return t, nil
}

func (t *takeoverListener) close() {
	if t != nil {
		t.ln.Close()
	}
}

// leave closes t without removing its path, where a successor listens.
func (t *takeoverListener) leave() {
	if t != nil {
		t.ln.SetUnlinkOnClose(false)
		t.ln.Close()
	}
}

// liveMount is a daemon's live mount.
type liveMount struct {
	dir     string
	name    string // the client's name (mount:DIR), client= in its log lines
	c       *fs.Client
	fsys    *fusefs.FS
	srv     *fuse.Server
	mo      fusefs.MountOptions
	resumed bool // srv serves a session taken over: unmount by path
	// beforeHandover runs once the client is quiet and before the
	// session goes (stripefs up stops its servers, which the successor
	// starts again).
	beforeHandover func() error
}

// log logs a line of the mount's daemon at level, with the client's name.
func (m *liveMount) log(level slog.Level, format string, args ...any) {
	slog.Log(context.Background(), level, fmt.Sprintf(format, args...), "client", m.name)
}

func (m *liveMount) unmount() error {
	if m.resumed {
		return fusefs.UnmountPath(m.dir)
	}
	return m.srv.Unmount()
}

// handOver gives m's session to the successor on conn. It returns
// errHandedOver once the successor serves it; any other outcome leaves m
// serving it still (after resuming it itself, if it had stopped).
func (m *liveMount) handOver(conn *net.UnixConn) error {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Minute))
	var hello struct{ Version int }
	if err := json.NewDecoder(conn).Decode(&hello); err != nil || hello.Version != takeoverVersion {
		m.log(slog.LevelError, "stripefs: takeover of %s refused: version %d (%v), this daemon speaks %d", m.dir, hello.Version, err, takeoverVersion)
		return nil
	}
	if err := m.fsys.CanHandOver(); err != nil {
		m.log(slog.LevelError, "stripefs: takeover of %s refused: %v", m.dir, err)
		_ = json.NewEncoder(conn).Encode(takeoverReply{Err: err.Error()})
		return nil
	}
	m.log(slog.LevelInfo, "stripefs: %s: handing the mount over", m.dir)
	dev, err := fusefs.StopReading(m.srv, m.fsys, time.Minute)
	if err != nil {
		m.log(slog.LevelWarn, "stripefs: %s: takeover: %v; serving on", m.dir, err)
		_ = json.NewEncoder(conn).Encode(takeoverReply{Err: err.Error()})
		return nil
	}
	defer dev.Close()
	ho := handover{Version: takeoverVersion, Args: daemonArgs(), Session: m.fsys.Snapshot(m.srv)}
	waits, err := m.fsys.WithdrawWaits(time.Minute)
	if err != nil {
		return m.resume(dev, ho.Session, err)
	}
	ho.Session.Waits = waits
	err = m.c.Quiesce(context.Background())
	if err == nil && m.beforeHandover != nil {
		err = m.beforeHandover()
	}
	if err != nil {
		return m.resume(dev, ho.Session, fmt.Errorf("quiesce: %w", err))
	}
	ho.Identity, ho.Flocks = m.c.Identity(), m.c.HeldFlocks()
	b, err := json.Marshal(&ho)
	if err != nil {
		return m.resume(dev, ho.Session, err)
	}
	_, _, err = conn.WriteMsgUnix([]byte(strconv.Itoa(len(b))+"\n"), unix.UnixRights(int(dev.Fd())), nil)
	if err == nil {
		_, err = conn.Write(b)
	}
	if err != nil {
		return m.resume(dev, ho.Session, err)
	}
	var r takeoverReply
	if err := json.NewDecoder(conn).Decode(&r); err != nil || !r.OK {
		return m.resume(dev, ho.Session, fmt.Errorf("successor: %v%s", err, r.Err))
	}
	m.fsys.Settle(true)
	m.log(slog.LevelInfo, "stripefs: %s: the mount is served by the new process (%d lock waits with it)", m.dir, len(waits))
	// A request a go-fuse loop took after it stopped reading is answered
	// before this process ends.
	for deadline := time.Now().Add(time.Minute); m.fsys.Busy() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return errHandedOver
}

// daemonArgs is the command line this daemon serves: its own, or the
// one it took over with the mount.
func daemonArgs() []string {
	if resuming != nil {
		return resuming.ho.Args
	}
	return os.Args[1:]
}

// resume serves m's session again after a takeover failed (why) once
// the daemon had stopped reading it.
func (m *liveMount) resume(dev *os.File, s fusefs.Session, why error) error {
	m.log(slog.LevelWarn, "stripefs: %s: takeover failed: %v; serving on", m.dir, why)
	m.fsys.Settle(false)
	srv, err := fusefs.Resume(m.fsys, m.c, dev, s, m.mo)
	if err != nil {
		return fmt.Errorf("%s: takeover failed (%v) and the mount cannot be served again: %w", m.dir, why, err)
	}
	m.srv, m.resumed = srv, true
	return nil
}

// takeOver connects to the daemon of dir, takes its session, and runs
// its command line again to serve it.
func takeOver(dir string) error {
	path := takeoverSocket(dir)
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("takeover of %s: no daemon listens on %s: %w", dir, path, err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Minute))
	if err := json.NewEncoder(conn).Encode(struct{ Version int }{takeoverVersion}); err != nil {
		conn.Close()
		return err
	}
	// The descriptor comes with a line giving the handover's length;
	// the handover follows (a socket stream may split a long one).
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		conn.Close()
		return fmt.Errorf("takeover of %s: %w", dir, err)
	}
	line, rest, _ := bytes.Cut(buf[:n], []byte("\n"))
	size, err := strconv.Atoi(string(line))
	if err != nil || size <= 0 || size > maxHandover {
		var r takeoverReply
		if json.Unmarshal(line, &r) == nil && r.Err != "" {
			err = errors.New(r.Err)
		}
		conn.Close()
		return fmt.Errorf("takeover of %s: the daemon answered: %v", dir, err)
	}
	body := make([]byte, size)
	copied := copy(body, rest)
	var ho handover
	if _, err := io.ReadFull(conn, body[copied:]); err != nil {
		conn.Close()
		return fmt.Errorf("takeover of %s: %w", dir, err)
	}
	if err := json.Unmarshal(body, &ho); err != nil || ho.Version != takeoverVersion {
		conn.Close()
		return fmt.Errorf("takeover of %s: handover version %d (%v), this binary speaks %d", dir, ho.Version, err, takeoverVersion)
	}
	dev, err := receivedFile(oob[:oobn])
	if err != nil {
		conn.Close()
		return fmt.Errorf("takeover of %s: %w", dir, err)
	}
	resuming = &successor{conn: conn, ho: ho, dev: dev}
	root := newRoot()
	root.SetArgs(ho.Args)
	return root.Execute()
}

func receivedFile(oob []byte) (*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("no /dev/fuse descriptor came: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("no /dev/fuse descriptor came: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), "/dev/fuse"), nil
}

// successor is a takeover in progress in the new process: runMount
// serves its session instead of mounting.
type successor struct {
	conn *net.UnixConn
	ho   handover
	dev  *os.File
}

var resuming *successor

// resumeMount is runMount's mount for a successor: the client under the
// old daemon's identity, its handles and locks, the session served.
func (s *successor) resumeMount(opts fs.Options, dir string, mo fusefs.MountOptions) (*liveMount, error) {
	fail := func(err error) (*liveMount, error) {
		_ = json.NewEncoder(s.conn).Encode(takeoverReply{Err: err.Error()})
		s.conn.Close()
		s.dev.Close()
		return nil, err
	}
	opts.Resume = &s.ho.Identity
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := fs.Connect(ctx, opts)
	if err != nil {
		return fail(err)
	}
	fsys := fusefs.New(c, mo.Options)
	if err := fsys.Adopt(ctx, s.ho.Session); err != nil {
		c.Close()
		return fail(err)
	}
	if err := c.AdoptFlocks(s.ho.Flocks); err != nil {
		c.Close()
		return fail(err)
	}
	srv, err := fusefs.Resume(fsys, c, s.dev, s.ho.Session, mo)
	if err != nil {
		c.Close()
		return fail(err)
	}
	// The waits are answered on the descriptor received; the server has
	// its own of the same description.
	if len(s.ho.Session.Waits) > 0 {
		fsys.AdoptWaits(s.dev, s.ho.Session.Waits)
	} else {
		s.dev.Close()
	}
	m := &liveMount{dir: dir, name: opts.Name, c: c, fsys: fsys, srv: srv, mo: mo, resumed: true}
	if err := json.NewEncoder(s.conn).Encode(takeoverReply{OK: true}); err != nil {
		m.log(slog.LevelError, "stripefs: %s: takeover: telling the old daemon: %v", dir, err)
	}
	s.conn.Close()
	// Under systemd (NotifyAccess=all) this process is the service now.
	notify(daemon.SdNotifyReady + "\nMAINPID=" + strconv.Itoa(os.Getpid()))
	return m, nil
}

// spawnSuccessor starts `stripefs mount --takeover m.dir` from the
// binary now at this one's path (SIGUSR2: the upgrade installed a new one).
func (m *liveMount) spawnSuccessor() {
	exe, err := os.Executable()
	if err != nil {
		m.log(slog.LevelError, "stripefs: takeover: %v", err)
		return
	}
	cmd := exec.Command(exe, "mount", "--takeover", "--background", m.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		m.log(slog.LevelError, "stripefs: takeover by %s: %v: %s", exe, err, out)
	}
}
