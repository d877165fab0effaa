package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
	"github.com/stripefs/stripefs/wire"
)

// intruder is a hand-written client: the project's rpc package with a
// client key, claiming whatever ids it likes, talking to the servers of
// a cluster without a kernel in between.
type intruder struct {
	t    *testing.T
	key  *rpc.Key
	cfg  *proto.Config
	mdts map[uint32]*rpc.Client
}

func newIntruder(t *testing.T, c *testcluster.Cluster) *intruder {
	t.Helper()
	master, err := rpc.ProcessKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := master.Derive(rpc.RoleClient, "")
	if err != nil {
		t.Fatal(err)
	}
	in := &intruder{t: t, key: key, mdts: map[uint32]*rpc.Client{}}
	mgs := in.client(c.MGS)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if in.cfg, err = rpc.Invoke[proto.Config](ctx, mgs, proto.GConfig, &proto.Empty{}); err != nil {
		t.Fatal(err)
	}
	return in
}

func (in *intruder) client(addr string) *rpc.Client {
	c := rpc.NewClient(addr, "intruder")
	c.Key, c.RetryFor = in.key, 5*time.Second
	in.t.Cleanup(func() { c.Close() })
	return c
}

// mdt is the client of the MDT holding fid.
func (in *intruder) mdt(fid proto.FID) *rpc.Client {
	idx := uint32(fid.MDT())
	if c := in.mdts[idx]; c != nil {
		return c
	}
	for _, t := range in.cfg.MDTs {
		if t.Index == idx {
			in.mdts[idx] = in.client(t.Addr)
			return in.mdts[idx]
		}
	}
	in.t.Fatalf("no mdt%d in the cluster map", idx)
	return nil
}

// call sends one request to the MDT of fid as uid (gid the same).
func (in *intruder) call(uid uint32, fid proto.FID, method uint16, req, resp any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = rpc.WithCred(ctx, &rpc.Cred{Uid: uid, Gid: uid})
	return in.mdt(fid).Do(ctx, &rpc.Call{Method: method, Req: req, Resp: resp})
}

func (in *intruder) lookup(uid uint32, dir proto.FID, name string) (proto.Attr, error) {
	var r proto.AttrReply
	err := in.call(uid, dir, proto.MLookup, &proto.LookupReq{Parent: dir, Name: name}, &r)
	if err == nil && r.Remote {
		var g proto.AttrReply
		err = in.call(uid, r.Attr.FID, proto.MGetattr, &proto.GetattrReq{FID: r.Attr.FID}, &g)
		r = g
	}
	return r.Attr, err
}

// TestHandWrittenClient: a client that skips the kernel and claims uid
// 1000 is refused by the MDTs themselves everything the kernel would
// refuse it, while the owner it does not claim to be is let through.
func TestHandWrittenClient(t *testing.T) {
	c, mnt := mount(t)
	p := func(s string) string { return filepath.Join(mnt, s) }
	const owner, user = 65534, 1000
	must(t, os.Chmod(mnt, 0o777)) // quota limits are not the root directory's mode's to grant
	must(t, os.Mkdir(p("home"), 0o700))
	writeFile(t, p("home/diary"), []byte("dear diary"))
	must(t, os.Chown(p("home/diary"), owner, owner))
	must(t, os.Chown(p("home"), owner, owner))
	must(t, os.Mkdir(p("pub"), 0o755))
	writeFile(t, p("pub/secret"), []byte("s3cret"))
	must(t, os.Chmod(p("pub/secret"), 0o600))
	must(t, os.Chown(p("pub/secret"), owner, owner))
	writeFile(t, p("pub/mine"), []byte("mine"))
	must(t, os.Chown(p("pub/mine"), user, user))
	must(t, os.Mkdir(p("tmp"), 0o777))
	must(t, syscall.Chmod(p("tmp"), 0o1777))
	writeFile(t, p("tmp/victim"), []byte("v"))
	must(t, os.Chown(p("tmp/victim"), owner, owner))

	in := newIntruder(t, c)
	root := proto.RootFID
	attr := func(uid uint32, dir proto.FID, name string) proto.Attr {
		t.Helper()
		a, err := in.lookup(uid, dir, name)
		if err != nil {
			t.Fatalf("lookup %q as %d: %v", name, uid, err)
		}
		return a
	}
	home, pub, tmp := attr(0, root, "home"), attr(user, root, "pub"), attr(user, root, "tmp")
	secret, mine := attr(user, pub.FID, "secret"), attr(user, pub.FID, "mine")
	quota := proto.QuotaXattrName(proto.QuotaKey{Type: proto.QuotaUser, ID: user})
	cases := []struct {
		name string
		uid  uint32
		do   func(uid uint32) error
		want syscall.Errno
	}{
		{"look up a name in another's 0700 directory", user, func(uid uint32) error {
			_, err := in.lookup(uid, home.FID, "diary")
			return err
		}, syscall.EACCES},
		{"list another's 0700 directory", user, func(uid uint32) error {
			return in.call(uid, home.FID, proto.MReaddir, &proto.ReaddirReq{FID: home.FID, Max: 10}, &proto.ReaddirReply{})
		}, syscall.EACCES},
		{"read another's 0600 file", user, func(uid uint32) error {
			return in.call(uid, secret.FID, proto.MOpen, &proto.OpenReq{FID: secret.FID, Flags: syscall.O_RDONLY}, &proto.AttrReply{})
		}, syscall.EACCES},
		{"take a write lock on another's 0600 file", user, func(uid uint32) error {
			return in.call(uid, secret.FID, proto.MLockEnqueue, &proto.LockEnqueueReq{Lock: proto.LockDesc{Res: secret.FID, Kind: proto.LockExtent,
				Mode: proto.LockPW, Start: 0, End: proto.LockEOF}}, &proto.LockEnqueueReply{})
		}, syscall.EACCES},
		{"grow another's file as if written", user, func(uid uint32) error {
			return in.call(uid, secret.FID, proto.MSetattr, &proto.SetattrReq{FID: secret.FID, Valid: proto.SetSize | proto.SetMtime,
				Size: 1 << 30, FromWrites: true}, &proto.AttrReply{})
		}, syscall.EACCES},
		{"create in root's 0755 directory", user, func(uid uint32) error {
			return in.call(uid, pub.FID, proto.MCreate, &proto.CreateReq{Parent: pub.FID, Name: "x", Mode: syscall.S_IFREG | 0o644}, &proto.AttrReply{})
		}, syscall.EACCES},
		{"unlink another's file in a sticky directory", user, func(uid uint32) error {
			return in.call(uid, tmp.FID, proto.MUnlink, &proto.UnlinkReq{Parent: tmp.FID, Name: "victim"}, &proto.UnlinkReply{})
		}, syscall.EPERM},
		{"rename another's file out of a sticky directory", user, func(uid uint32) error {
			return in.call(uid, tmp.FID, proto.MRename, &proto.RenameReq{SrcParent: tmp.FID, SrcName: "victim", DstParent: tmp.FID, DstName: "mine"}, &proto.RenameReply{})
		}, syscall.EPERM},
		{"chown one's own file", user, func(uid uint32) error {
			return in.call(uid, mine.FID, proto.MSetattr, &proto.SetattrReq{FID: mine.FID, Valid: proto.SetUid, Uid: 0}, &proto.AttrReply{})
		}, syscall.EPERM},
		{"chmod another's file", user, func(uid uint32) error {
			return in.call(uid, secret.FID, proto.MSetattr, &proto.SetattrReq{FID: secret.FID, Valid: proto.SetMode, Mode: 0o777}, &proto.AttrReply{})
		}, syscall.EPERM},
		{"set a trusted.* xattr on one's own file", user, func(uid uint32) error {
			return in.call(uid, mine.FID, proto.MSetxattr, &proto.XattrReq{FID: mine.FID, Name: "trusted.evil", Value: []byte("1")}, &proto.Empty{})
		}, syscall.EPERM},
		{"set one's own quota", user, func(uid uint32) error {
			return in.call(uid, root, proto.MSetxattr, &proto.XattrReq{FID: root, Name: quota, Value: []byte("bhard=0 ihard=0")}, &proto.Empty{})
		}, syscall.EPERM},
		// The same requests as the owner (or root) go through: the
		// refusals above are the checks, not a broken request.
		{"the owner reads the 0600 file", owner, func(uid uint32) error {
			return in.call(uid, secret.FID, proto.MOpen, &proto.OpenReq{FID: secret.FID, Flags: syscall.O_RDONLY}, &proto.AttrReply{})
		}, 0},
		{"the owner looks into its 0700 directory", owner, func(uid uint32) error {
			_, err := in.lookup(uid, home.FID, "diary")
			return err
		}, 0},
		{"the owner chmods its file", owner, func(uid uint32) error {
			return in.call(uid, secret.FID, proto.MSetattr, &proto.SetattrReq{FID: secret.FID, Valid: proto.SetMode, Mode: 0o600}, &proto.AttrReply{})
		}, 0},
		{"root sets a quota", 0, func(uid uint32) error {
			return in.call(uid, root, proto.MSetxattr, &proto.XattrReq{FID: root, Name: quota, Value: []byte("bhard=0 ihard=100")}, &proto.Empty{})
		}, 0},
	}
	for _, tc := range cases {
		err := tc.do(tc.uid)
		var got syscall.Errno
		if err != nil && !errors.As(err, &got) {
			t.Errorf("%s: %v, not an errno", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s (uid %d): got %v, want %v", tc.name, tc.uid, err, tc.want)
		}
	}
	if b, err := os.ReadFile(p("pub/secret")); err != nil || string(b) != "s3cret" {
		t.Errorf("the secret after the attempts: %q %v", b, err)
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(p("pub/secret"), &st))
	if st.Size != 6 || st.Uid != owner {
		t.Errorf("the secret's size %d, owner %d after the attempts", st.Size, st.Uid)
	}
	if _, err := os.Stat(p("tmp/victim")); err != nil {
		t.Errorf("the sticky directory's victim: %v", err)
	}
}

// TestClientKeyRefusedServerMethods: a client key calling each
// server-to-server and admin method of every kind of server gets EPERM;
// an admin key is let into the admin ones.
func TestClientKeyRefusedServerMethods(t *testing.T) {
	c := testcluster.Start(t, 2, 1)
	in := newIntruder(t, c)
	master, _ := rpc.ProcessKey()
	admin, err := master.Derive(rpc.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]string{"mdt0 (mgs)": c.MGS, "mdt1": c.MDTs[1].Addr, "ost0": c.OSTs[0].Addr}
	for name, addr := range servers {
		cl := in.client(addr)
		ad := rpc.NewClient(addr, "admin")
		ad.Key = admin
		defer ad.Close()
		for _, set := range []struct {
			methods []uint16
			admin   bool
		}{{proto.ServerMethods, false}, {proto.AdminMethods, true}} {
			for _, m := range set.methods {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := cl.Do(ctx, &rpc.Call{Method: m, Req: rpc.RawMsg(nil)})
				cancel()
				if !errors.Is(err, syscall.EPERM) {
					t.Errorf("%s: client key calling %s: %v, want EPERM", name, proto.MethodName(m), err)
				}
				if !set.admin {
					continue
				}
				ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
				err = ad.Do(ctx, &rpc.Call{Method: m, Req: rpc.RawMsg(nil)})
				cancel()
				if errors.Is(err, syscall.EPERM) {
					t.Errorf("%s: admin key calling %s: EPERM", name, proto.MethodName(m))
				}
			}
		}
	}
}

// TestWrongKeysRefused: the mount, the NFS gateway and the tools, each
// without a key and with another filesystem's, are refused with a
// message that says so, and so is the server's side of it.
func TestWrongKeysRefused(t *testing.T) {
	c := testcluster.Start(t, 1, 1)
	dir := t.TempDir()
	other := filepath.Join(dir, "other.key")
	run := func(env []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := execCommand(ctx, c.Bin, args...)
		cmd.Env = append(withoutKey(os.Environ()), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(nil, "keygen", other); err != nil {
		t.Fatalf("keygen: %v %s", err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	tools := map[string][]string{
		"mount":        {"mount", "--mgs", c.MGS, mnt},
		"nfs gateway":  {"nfs", "--mgs", c.MGS, "--listen", "127.0.0.1:0"},
		"stats":        {"stats", "--mgs", c.MGS},
		"set_param":    {"set_param", "--mgs", c.MGS, "mdt.remote_sync=0"},
		"fsck":         {"fsck", "--mgs", c.MGS},
		"bench survey": {"bench", "survey", "--mgs", c.MGS, "--size", "4MiB"},
	}
	refused := func(name string, args []string) {
		for _, k := range []struct {
			how  string
			env  []string
			want string
		}{
			{"no key", []string{"STRIPEFS_KEY="}, "no filesystem key"},
			{"another filesystem's key", []string{"STRIPEFS_KEY=" + other}, "does not hold filesystem \"stripefs\"'s"},
		} {
			out, err := run(k.env, args...)
			if err == nil || !contains(out, k.want) {
				t.Errorf("%s with %s: %v\n%s\nwant an error saying %q", name, k.how, err, out, k.want)
			}
		}
	}
	for name, args := range tools {
		refused(name, args)
	}
	// Tools given a mount point take its key (root, who can read it);
	// another key given is still refused, and a user who cannot read
	// the mount's key gets no further.
	mounted := c.MountFS()
	asNobody := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := execCommand(ctx, c.Bin, args...)
		cmd.Env = withoutKey(os.Environ())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for name, args := range map[string][]string{
		"df":    {"df", mounted},
		"quota": {"quota", "-u", "0", mounted},
	} {
		if out, err := run(nil, args...); err != nil {
			t.Errorf("%s as root with the mount's key: %v\n%s", name, err, out)
		}
		out, err := run([]string{"STRIPEFS_KEY=" + other}, args...)
		if err == nil || !contains(out, "does not hold filesystem \"stripefs\"'s") {
			t.Errorf("%s with another filesystem's key: %v\n%s", name, err, out)
		}
		if out, err := asNobody(args...); err == nil || !contains(out, "key") {
			t.Errorf("%s as a user who cannot read the key: %v\n%s", name, err, out)
		}
	}
	// Tools that work through the mount are the mount's to authorise,
	// and quota limits are root's even where the root directory's mode
	// would let a user write it.
	must(t, os.Chmod(mounted, 0o777))
	if out, err := asNobody("setquota", "-u", "65534", "-b", "0:1G", mounted); err == nil || !contains(out, "operation not permitted") {
		t.Errorf("setquota by a user: %v\n%s", err, out)
	}
	if out, err := run(nil, "setquota", "-u", "65534", "-b", "0:1G", mounted); err != nil {
		t.Errorf("setquota by root: %v\n%s", err, out)
	}
	if log, _ := os.ReadFile(c.MDTs[0].Log); !contains(string(log), "does not hold filesystem \"stripefs\"'s") {
		t.Errorf("mdt0's log does not say why it refused:\n%s", log)
	}
}

// TestHelloWithoutProof: a raw TCP client that sends a hello and then a
// request, without the proof, is disconnected and its request never
// served.
func TestHelloWithoutProof(t *testing.T) {
	c := testcluster.Start(t, 1, 1)
	before := statfsCalls(t, c.MGS)
	conn := rawHello(t, c.MGS)
	defer conn.Close()
	hb := make([]byte, rpc.HeaderSize)
	(&rpc.Header{Kind: rpc.KindRequest, Method: proto.MStatfs, ReqID: 1, XID: 1}).Encode(hb)
	conn.Write(hb)
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	buf := make([]byte, 4096)
	var err error
	for err == nil {
		_, err = conn.Read(buf)
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept the connection open")
	}
	if after := statfsCalls(t, c.MGS); after != before {
		t.Fatalf("statfs served %d times to a connection without a proof", after-before)
	}
}

func statfsCalls(t *testing.T, addr string) int64 {
	t.Helper()
	cl := rpc.NewClient(addr, "stats")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := rpc.QueryStats(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Methods {
		if m.Method == proto.MStatfs {
			return m.Calls
		}
	}
	return 0
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func execCommand(ctx context.Context, bin string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, bin, args...)
}

// withoutKey is env without STRIPEFS_KEY.
func withoutKey(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "STRIPEFS_KEY=") {
			out = append(out, e)
		}
	}
	return out
}

// wireHello mirrors the rpc package's hello, field for field: the wire
// codec is positional, so this is the hello a program of another
// language would send.
type wireHello struct {
	Version          uint32
	Name, UUID, Boot string
	FSName           string
	Role             uint8
	Group            string
	Flavor           uint8
	Nonce, DH        []byte
}

// rawHello dials addr and exchanges hellos, as the key's holder would
// begin, and stops there: the proof is never sent.
func rawHello(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	msg := wire.Marshal(nil, &wireHello{Version: rpc.Version, Name: "raw", UUID: rpc.NewUUID(), FSName: "stripefs",
		Role: uint8(rpc.RoleClient), Flavor: uint8(rpc.FlavorAuth), Nonce: make([]byte, 32), DH: make([]byte, 32)})
	hb := make([]byte, rpc.HeaderSize)
	(&rpc.Header{Kind: rpc.KindHello, MsgLen: uint32(len(msg))}).Encode(hb)
	if _, err := conn.Write(append(hb, msg...)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, hb); err != nil {
		t.Fatalf("server hello: %v", err)
	}
	h, err := rpc.DecodeHeader(hb)
	if err != nil || h.Kind != rpc.KindHello || h.Status != 0 {
		t.Fatalf("server hello: %+v %v", h, err)
	}
	if _, err := io.CopyN(io.Discard, conn, int64(h.MsgLen)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Time{})
	return conn
}

// TestUpKey: `stripefs up` makes its key in its data directory (0600) on
// first start and keeps it; another mount and the tools need it, and are
// refused without it or with another filesystem's.
func TestUpKey(t *testing.T) {
	dir := t.TempDir()
	data, mnt := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
	env := withoutKey(os.Environ())
	cmd := startUpEnv(t, env, data, mnt)
	keyPath := filepath.Join(data, "stripefs.key")
	st, err := os.Stat(keyPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("up's key: %v, mode %v", err, st.Mode())
	}
	first, _ := os.ReadFile(keyPath)
	mgs := getxattr(t, mnt, "stripefs.mgs")
	other := filepath.Join(dir, "other.key")
	bin := testcluster.Binary(t)
	run := func(extra []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := execCommand(ctx, bin, args...)
		c.Env = append(append([]string(nil), env...), extra...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := run(nil, "keygen", other); err != nil {
		t.Fatalf("keygen: %v %s", err, out)
	}
	mnt2 := filepath.Join(dir, "mnt2")
	must(t, os.Mkdir(mnt2, 0o755))
	for name, args := range map[string][]string{
		"mount": {"mount", "--mgs", mgs, mnt2},
		"stats": {"stats", "--mgs", mgs},
	} {
		if out, err := run(nil, args...); err == nil || !contains(out, "no filesystem key") {
			t.Errorf("%s without a key: %v\n%s", name, err, out)
		}
		if out, err := run([]string{"STRIPEFS_KEY=" + other}, args...); err == nil || !contains(out, "does not hold") {
			t.Errorf("%s with another filesystem's key: %v\n%s", name, err, out)
		}
	}
	if out, err := run(nil, "stats", "--key", keyPath, "--mgs", mgs); err != nil {
		t.Errorf("stats with up's key: %v\n%s", err, out)
	}
	if out, err := run(nil, "df", mnt); err != nil {
		t.Errorf("df of up's mount, its key found through it: %v\n%s", err, out)
	}
	stopUp(t, cmd)
	cmd = startUpEnv(t, env, data, mnt)
	defer stopUp(t, cmd)
	if again, _ := os.ReadFile(keyPath); string(again) != string(first) {
		t.Error("up made a new key on its second start")
	}
}

// TestNFSCredentials: the gateway runs each call as its AUTH_UNIX user
// (libnfs's tools send uid= and gid= of their URL), root squashed by
// default, everyone squashed under --all-squash, root as root under
// --no-root-squash; AUTH_NONE calls are refused unless --all-squash.
func TestNFSCredentials(t *testing.T) {
	c, mnt := mount(t)
	p := func(s string) string { return filepath.Join(mnt, s) }
	must(t, os.Chmod(mnt, 0o777))
	writeFile(t, p("secret"), []byte("for 60000 only"))
	must(t, os.Chmod(p("secret"), 0o600))
	must(t, os.Chown(p("secret"), 60000, 60000))
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, src, []byte("via nfs"))
	as := func(g *nfsGateway, path string, uid, gid int) string {
		return g.url(path) + fmt.Sprintf("&uid=%d&gid=%d", uid, gid)
	}
	def := startNFSArgs(t, c)
	owned := func(path string, want uint32) {
		t.Helper()
		if u := owner(t, p(path)); u != want {
			t.Errorf("%s is owned by %d, want %d", path, u, want)
		}
	}
	mustNFS(t, "nfs-cp", src, as(def, "/by-root", 0, 0))
	owned("by-root", 65534) // root squash: root's file is nobody's
	mustNFS(t, "nfs-cp", src, as(def, "/by-1000", 1000, 1000))
	owned("by-1000", 1000)
	if out, err := nfsTool("nfs-cat", as(def, "/secret", 1000, 1000)); err == nil {
		t.Errorf("uid 1000 read another's 0600 file through the gateway: %s", out)
	}
	if out, err := nfsTool("nfs-cat", as(def, "/secret", 0, 0)); err == nil {
		t.Errorf("squashed root read another's 0600 file through the gateway: %s", out)
	}
	if out := mustNFS(t, "nfs-cat", as(def, "/secret", 60000, 60000)); string(out) != "for 60000 only" {
		t.Errorf("the owner through the gateway: %q", out)
	}
	if st := authNoneGetattr(t, def); st != "denied" {
		t.Errorf("an AUTH_NONE call to the default gateway: %s, want denied", st)
	}
	trusting := startNFSArgs(t, c, "--no-root-squash")
	mustNFS(t, "nfs-cp", src, as(trusting, "/by-real-root", 0, 0))
	owned("by-real-root", 0)
	squashAll := startNFSArgs(t, c, "--all-squash", "--anon", "4000:4000")
	mustNFS(t, "nfs-cp", src, as(squashAll, "/by-anyone", 1000, 1000))
	owned("by-anyone", 4000)
	if st := authNoneGetattr(t, squashAll); st != "accepted" {
		t.Errorf("an AUTH_NONE call under --all-squash: %s, want accepted", st)
	}
}

// authNoneGetattr sends the gateway a GETATTR of the root with AUTH_NONE
// and says how it was answered: "accepted" or "denied".
func authNoneGetattr(t *testing.T, g *nfsGateway) string {
	t.Helper()
	conn, err := net.Dial("tcp", "127.0.0.1:"+g.port)
	must(t, err)
	defer conn.Close()
	fh := make([]byte, 16) // any handle: a denial comes before it is read
	words := []uint32{7, 0, 2, 100003, 3, 1, 0, 0, 0, 0, uint32(len(fh))}
	body := make([]byte, 0, 4*len(words)+len(fh))
	for _, w := range words {
		body = binary.BigEndian.AppendUint32(body, w)
	}
	body = append(body, fh...)
	rec := binary.BigEndian.AppendUint32(nil, 1<<31|uint32(len(body)))
	_, err = conn.Write(append(rec, body...))
	must(t, err)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	head := make([]byte, 16)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatalf("reply to an AUTH_NONE GETATTR: %v", err)
	}
	if binary.BigEndian.Uint32(head[12:]) == 1 { // reply_stat MSG_DENIED
		return "denied"
	}
	return "accepted"
}

// rssMiB is a process's resident memory.
func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestIdleAndSlowPeers: a thousand connections that never say hello,
// and authenticated peers that start frames and stall or announce huge
// ones, neither slow the real mount's stat nor grow the MDT's memory
// without bound; the stalled ones are cut off after the frame timeout.
func TestIdleAndSlowPeers(t *testing.T) {
	c := testcluster.StartArgs(t, 1, 1, "--frame-timeout", "2s", "--hello-timeout", "3s")
	mnt := c.MountFS()
	writeFile(t, filepath.Join(mnt, "f"), []byte("x"))
	stat := func() time.Duration {
		t.Helper()
		var worst time.Duration
		for i := range 20 {
			start := time.Now()
			// A name not there: the lookup reaches the MDT every time.
			if _, err := os.Stat(filepath.Join(mnt, fmt.Sprint("none-", i, time.Now().UnixNano()))); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("stat: %v", err)
			}
			worst = max(worst, time.Since(start))
		}
		return worst
	}
	before, rss0 := stat(), rssMiB(t, c.MDTs[0].Pid())
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for range 1000 {
		nc, err := net.Dial("tcp", c.MGS)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, nc)
	}
	idle := stat()
	// Authenticated peers: half start a frame and stall, half announce
	// 60 MiB frames and send 3 bytes of them.
	key, _ := rpc.ProcessKey()
	var stalled []net.Conn
	hb := make([]byte, rpc.HeaderSize)
	for i := range 100 {
		// As a real client does, it dials again if its handshake was the
		// oldest of its address's when more came: on a loaded machine the
		// idle connections' retried SYNs can still be arriving.
		var nc net.Conn
		var err error
		for try := 0; try < 5; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			nc, err = rpc.DialRaw(ctx, c.MGS, key, rpc.RoleClient)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		must(t, err)
		conns = append(conns, nc)
		stalled = append(stalled, nc)
		bulk := uint32(100)
		if i%2 == 1 {
			bulk = 60 << 20
		}
		(&rpc.Header{Kind: rpc.KindRequest, Method: proto.MStatfs, ReqID: 1, XID: uint64(i + 1), BulkLen: bulk}).Encode(hb)
		nc.Write(append(hb, 1, 2, 3))
	}
	slow := stat()
	rss1 := rssMiB(t, c.MDTs[0].Pid())
	t.Logf("mount stat, worst of 20: %v alone, %v beside 1000 idle connections, %v beside 100 stalled frames; mdt0 RSS %.0f → %.0f MiB",
		before, idle, slow, rss0, rss1)
	if idle > 2*time.Second || slow > 2*time.Second {
		t.Errorf("stat slowed to %v (idle peers) and %v (stalled frames)", idle, slow)
	}
	if rss1-rss0 > 128 {
		t.Errorf("mdt0 grew %.0f MiB with 1000 idle and 100 stalled peers", rss1-rss0)
	}
	// The stalled frames are cut off after --frame-timeout (2s).
	deadline := time.Now().Add(10 * time.Second)
	for _, nc := range stalled {
		nc.SetReadDeadline(deadline)
		// A close with the peer's unread bytes still queued is a reset
		// (RFC 1122 4.2.2.13), which is as much a disconnection as EOF.
		if _, err := io.ReadAll(nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a stalled peer was not disconnected within 10s: %v", err)
		}
	}
	if d := time.Until(deadline); d < 0 {
		t.Fatal("stalled peers outlived the frame timeout")
	}
}
