package nfsexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/stripefs/stripefs/fs"
	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
)

// startGateway runs servers in this process (so the race detector sees
// every goroutine but the NFS client's) and a gateway over TCP loopback.
func startGateway(t *testing.T, opts Options) (*Gateway, *fs.Client, string) {
	t.Helper()
	c, _ := testcluster.InProc(t, 2, 4, fs.Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	opts.Squash.NoRootSquash = true // the tests write as root
	g := New(c, opts)
	served := make(chan error, 1)
	go func() { served <- g.Serve(l) }()
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return g, c, l.Addr().String()
}

func dial(addr string) (*nfsc.Target, func(), error) {
	// The client binds a random local port and does not retry one in use.
	var client *rpc.Client
	var err error
	for range 20 {
		if client, err = rpc.DialTCP("tcp", addr, false); !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	target, err := (&nfsc.Mount{Client: client}).Mount("/", rpc.NewAuthUnix("test", 0, 0).Auth())
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return target, client.Close, nil
}

// TestGatewayConcurrent has several NFS clients create, write, read,
// rename and remove at once, some sharing one file, with a tiny open-file
// cache so that files are evicted and reopened under them.
func TestGatewayConcurrent(t *testing.T) {
	g, c, addr := startGateway(t, Options{MaxOpenFiles: 3, IdleClose: 20 * time.Millisecond})
	ctx := context.Background()
	if _, _, err := c.Create(ctx, proto.RootFID, "shared", 0o100644, 0, true, false, 0); err != nil {
		t.Fatal(err)
	}
	const workers, piece = 6, 64 << 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := nfsWorker(addr, w, piece); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every worker's piece of the shared file, through the client library.
	a, err := c.Lookup(ctx, proto.RootFID, "shared")
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Open(ctx, a.FID, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	got := make([]byte, workers*piece)
	if n, err := f.ReadAt(ctx, got, 0); n != len(got) || err != nil {
		t.Fatalf("shared file: read %d, %v", n, err)
	}
	for w := range workers {
		if !bytes.Equal(got[w*piece:(w+1)*piece], bytes.Repeat([]byte{byte('a' + w)}, piece)) {
			t.Errorf("shared file: worker %d's piece differs", w)
		}
	}
	if st := g.Stats(); st.StableWrites == 0 || st.Commits == 0 || st.SyncErrors != 0 {
		t.Errorf("stats %+v: want stable writes and commits, no errors", st)
	}
}

func nfsWorker(addr string, w, piece int) error {
	target, closeFn, err := dial(addr)
	if err != nil {
		return err
	}
	defer closeFn()
	dir := fmt.Sprintf("/d%d", w)
	if _, err := target.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	data := make([]byte, 300000+w)
	rand.NewChaCha8([32]byte{byte(w)}).Read(data)
	f, err := target.OpenFile(dir+"/f", 0o644)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	for off := 0; off < len(data); off += 70000 { // unaligned pieces
		if _, err := f.Write(data[off:min(off+70000, len(data))]); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
	}
	if err := f.Close(); err != nil { // COMMIT
		return fmt.Errorf("commit: %w", err)
	}
	sh, err := target.OpenFile("/shared", 0o644)
	if err != nil {
		return fmt.Errorf("open shared: %w", err)
	}
	if _, err := sh.Seek(int64(w*piece), io.SeekStart); err != nil {
		return err
	}
	for i := 0; i < piece; i += 4096 {
		if _, err := sh.Write(bytes.Repeat([]byte{byte('a' + w)}, 4096)); err != nil {
			return fmt.Errorf("shared write: %w", err)
		}
	}
	if err := sh.Close(); err != nil {
		return fmt.Errorf("shared commit: %w", err)
	}
	r, err := target.Open(dir + "/f")
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	got := make([]byte, len(data))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, data) {
		return fmt.Errorf("read back: %v, equal %v", err, bytes.Equal(got, data))
	}
	if err := target.Rename(dir+"/f", dir+"/g"); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	if _, _, err := target.Lookup(dir + "/f"); err == nil {
		return fmt.Errorf("old name still found after rename")
	}
	if err := target.Symlink("g", dir+"/link"); err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	ents, err := target.ReadDirPlus(dir)
	if err != nil {
		return fmt.Errorf("readdirplus: %w", err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.FileName] = true
	}
	if !names["g"] || !names["link"] || names["f"] {
		return fmt.Errorf("listing %v", names)
	}
	if err := target.Remove(dir + "/g"); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	if err := target.Remove(dir + "/link"); err != nil {
		return fmt.Errorf("remove link: %w", err)
	}
	if err := target.RmDir(dir); err != nil {
		return fmt.Errorf("rmdir: %w", err)
	}
	return nil
}

func TestGatewayReadOnly(t *testing.T) {
	_, c, addr := startGateway(t, Options{ReadOnly: true})
	ctx := context.Background()
	if _, err := c.Mkdir(ctx, proto.RootFID, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	target, closeFn, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if _, err := target.Create("/new", 0o644); err == nil {
		t.Errorf("create on a read-only gateway succeeded")
	}
	if err := target.RmDir("/d"); err == nil {
		t.Errorf("rmdir on a read-only gateway succeeded")
	}
	if _, _, err := target.Lookup("/d"); err != nil {
		t.Errorf("lookup on a read-only gateway: %v", err)
	}
}

func TestGatewayRefuses(t *testing.T) {
	g, _, addr := startGateway(t, Options{Allow: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	// A NULL call to the NFS program: a served client gets a reply.
	conn.Write(record(putWords(nil, 1, rpcCall, 2, nfsProgram, nfsVersion, 0, 0, 0, 0, 0)))
	// Closed unread, the connection ends in EOF or a reset; never a reply.
	if n, err := conn.Read(make([]byte, 64)); n > 0 || err == nil || os.IsTimeout(err) {
		t.Fatalf("a client outside the allow-list: read %d bytes, %v; want the connection closed", n, err)
	}
	if g.Stats().Refused == 0 {
		t.Errorf("refusal not counted")
	}
}
