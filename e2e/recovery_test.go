package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stripefs/stripefs/internal/testcluster"
	"github.com/stripefs/stripefs/proto"
	"github.com/stripefs/stripefs/rpc"
)

// mdtCounters reads an MDT's counters straight from it (a mount may be
// frozen or gone).
func mdtCounters(t *testing.T, addr string) map[string]int64 {
	t.Helper()
	c := rpc.NewClient(addr, "test-stats")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := rpc.QueryStats(ctx, c)
	must(t, err)
	out := map[string]int64{}
	for _, k := range r.Counters {
		out[k.Name] = k.Value
	}
	return out
}

// waitCounters polls the MDT until ok holds (60s at most).
func waitCounters(t *testing.T, addr, what string, ok func(map[string]int64) bool) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := mdtCounters(t, addr)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("MDT never reached %s; counters %v", what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fidOf(t *testing.T, path string) proto.FID {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(path, &st))
	return proto.FIDFromIno(st.Ino)
}

// lookupOnMDT asks the MDT directly, past every kernel cache.
func lookupOnMDT(ctx context.Context, c *rpc.Client, dir proto.FID, name string) error {
	_, err := rpc.Invoke[proto.AttrReply](ctx, c, proto.MLookup, &proto.LookupReq{Parent: dir, Name: name})
	return err
}

// TestMDTRecoveryTwoClients: two mounts (two clients) make changes that
// depend on each other's (each creates files in the directory the other
// made) on an MDT that commits nothing (1h commit interval), so every
// reply is uncommitted and kept. The MDT is killed -9 and restarted with
// client B frozen: client A comes back and replays, but the window stays
// open for B, and a third client's request waits in it. B thaws, replays,
// the window closes on both clients' replay-done, and the held request
// runs. Every acknowledged file is there.
func TestMDTRecoveryTwoClients(t *testing.T) {
	c := testcluster.StartArgs(t, 1, 2, "--commit-interval", "1h", "--recovery-window", "60s")
	mdt := c.MDTs[0]
	pa, ma := c.MountAt("clientA")
	pb, mb := c.MountAt("clientB")
	_ = pa
	must(t, os.Mkdir(filepath.Join(ma, "a"), 0o755))
	must(t, os.Mkdir(filepath.Join(mb, "b"), 0o755))
	const n = 10
	want := map[string]string{}
	for i := 0; i < n; i++ {
		fa, fb := filepath.Join("b", fmt.Sprintf("fromA-%d", i)), filepath.Join("a", fmt.Sprintf("fromB-%d", i))
		writeFile(t, filepath.Join(ma, fa), []byte("A"+fa))
		writeFile(t, filepath.Join(mb, fb), []byte("B"+fb))
		want[fa], want[fb] = "A"+fa, "B"+fb
	}
	dirA, dirB := fidOf(t, filepath.Join(ma, "a")), fidOf(t, filepath.Join(ma, "b"))
	if s := mdtCounters(t, mdt.Addr); s["clients"] != 2 {
		t.Fatalf("client table before the crash: %d clients, want 2 (%v)", s["clients"], s)
	}

	c.Signal(pb, syscall.SIGSTOP)
	c.Kill9(mdt)
	c.Restart(mdt)

	// A third client, new to the MDT, asks for one of B's files while B
	// is frozen: the window holds it.
	third := rpc.NewClient(mdt.Addr, "third")
	defer third.Close()
	res := make(chan error, 1)
	go func() {
		res <- lookupOnMDT(context.Background(), third, dirA, fmt.Sprintf("fromB-%d", n-1))
	}()
	held := waitCounters(t, mdt.Addr, "a request held by the window", func(s map[string]int64) bool {
		return s["recovery_status"] == 1 && s["recovery_requests_waiting"] >= 1
	})
	select {
	case err := <-res:
		t.Fatalf("a new request ran during recovery (err %v); counters %v", err, held)
	default:
	}
	if held["recovery_clients_known"] != 2 || held["recovery_clients_recovered"] > 1 {
		t.Fatalf("window while B is frozen: %v", held)
	}

	c.Signal(pb, syscall.SIGCONT)
	select {
	case err := <-res:
		must(t, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("the held request never ran; counters %v", mdtCounters(t, mdt.Addr))
	}
	s := mdtCounters(t, mdt.Addr)
	if s["recovery_status"] != 0 || s["recovery_clients_recovered"] != 2 || s["recovery_clients_evicted"] != 0 ||
		s["recovery_replays_refused"] != 0 || s["recovery_requests_delayed"] < 1 {
		t.Fatalf("after recovery: %v", s)
	}
	// Each file is at least a create and a close, each directory a mkdir.
	if s["recovery_replays"] < 2*2*n+2 {
		t.Fatalf("only %d replays; counters %v", s["recovery_replays"], s)
	}
	if testing.Verbose() {
		logb, _ := os.ReadFile(mdt.Log)
		t.Logf("MDT log:\n%s", logb)
	}
	t.Logf("recovery: %d replays (%d answered from done-records) in %d ms, %d requests held",
		s["recovery_replays"], s["resends_reconstructed"], s["recovery_window_ms"], s["recovery_requests_delayed"])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for rel, data := range want {
		dir := dirA
		if strings.HasPrefix(rel, "b/") {
			dir = dirB
		}
		if err := lookupOnMDT(ctx, third, dir, filepath.Base(rel)); err != nil {
			t.Errorf("%s after recovery: %v", rel, err)
		}
		for _, m := range []string{ma, mb} {
			if got, err := os.ReadFile(filepath.Join(m, rel)); err != nil || string(got) != data {
				t.Errorf("%s through %s: %q %v", rel, m, got, err)
			}
		}
	}
	// The clients work on.
	writeFile(t, filepath.Join(mb, "after"), []byte("x"))
}

// TestMDTRecoveryEvictsLostClient: client B dies (kill -9, lazy unmount)
// with uncommitted changes, then the MDT is killed and restarted. The
// window waits for B until its timeout (the test cluster's short one),
// evicts it and says so in the log; A recovers, and A's files are there.
func TestMDTRecoveryEvictsLostClient(t *testing.T) {
	c := testcluster.StartArgs(t, 1, 2, "--commit-interval", "1h")
	mdt := c.MDTs[0]
	_, ma := c.MountAt("clientA")
	pb, mb := c.MountAt("clientB")
	// Interleaved: B's creates, which are never replayed, take FIDs
	// between A's. A's replayed creates must get their first FIDs back
	// (the replay carries its first reply), or A's later setattr and
	// close of those FIDs would fail and its files read back empty.
	must(t, os.Mkdir(filepath.Join(mb, "b"), 0o755))
	must(t, os.Mkdir(filepath.Join(ma, "a"), 0o755))
	for i := 0; i < 5; i++ {
		writeFile(t, filepath.Join(mb, "b", fmt.Sprint(i)), []byte(fmt.Sprint("B", i)))
		writeFile(t, filepath.Join(ma, "a", fmt.Sprint(i)), []byte(fmt.Sprint("A", i)))
	}
	c.Kill9(pb)
	_ = exec.Command("fusermount3", "-u", "-z", mb).Run()
	c.Kill9(mdt)
	start := time.Now()
	c.Restart(mdt)
	s := waitCounters(t, mdt.Addr, "the end of recovery", func(s map[string]int64) bool { return s["recovery_status"] == 0 })
	took := time.Since(start)
	if s["recovery_clients_known"] != 2 || s["recovery_clients_recovered"] != 1 || s["recovery_clients_evicted"] != 1 {
		t.Fatalf("after the window: %v", s)
	}
	window, _ := time.ParseDuration(testcluster.TestWindow)
	if s["recovery_window_ms"] < window.Milliseconds() {
		t.Fatalf("window ended after %d ms, before its %v timeout, with B gone: %v", s["recovery_window_ms"], window, s)
	}
	if s["clients"] != 1 {
		t.Fatalf("the evicted client is still in the table: %v", s)
	}
	log, err := os.ReadFile(mdt.Log)
	must(t, err)
	if !strings.Contains(string(log), "evicted client") {
		t.Fatalf("the MDT log does not say who was evicted:\n%s", log)
	}
	for i := 0; i < 5; i++ {
		if got := readFile(t, filepath.Join(ma, "a", fmt.Sprint(i))); string(got) != fmt.Sprint("A", i) {
			t.Fatalf("A's file %d: %q", i, got)
		}
	}
	t.Logf("restart to end of recovery: %v (window %d ms, %d replays)", took.Round(time.Millisecond), s["recovery_window_ms"], s["recovery_replays"])
}

// TestMDTEvictsLostClient: a client whose process dies while the MDT runs
// loses its connection; after --evict-after the MDT commits what it
// answered that client and drops it from the client table, so a later
// restart (even by kill -9) does not wait for it, and nothing the client
// was told is lost.
func TestMDTEvictsLostClient(t *testing.T) {
	c := testcluster.StartArgs(t, 1, 2, "--commit-interval", "1h", "--evict-after", "1s")
	mdt := c.MDTs[0]
	pa, ma := c.MountAt("clientA")
	must(t, os.Mkdir(filepath.Join(ma, "a"), 0o755))
	for i := 0; i < 3; i++ {
		writeFile(t, filepath.Join(ma, "a", fmt.Sprint(i)), []byte(fmt.Sprint("A", i)))
	}
	if s := mdtCounters(t, mdt.Addr); s["clients"] != 1 {
		t.Fatalf("client A is not in the client table: %v", s)
	}
	c.Kill9(pa)
	_ = exec.Command("fusermount3", "-u", "-z", ma).Run()
	waitCounters(t, mdt.Addr, "the eviction of the lost client", func(s map[string]int64) bool {
		return s["clients_evicted_lost"] == 1 && s["clients"] == 0
	})
	log, err := os.ReadFile(mdt.Log)
	must(t, err)
	if !strings.Contains(string(log), fmt.Sprintf("evicted client %q", "mount:"+ma)) {
		t.Fatalf("the MDT log does not say whom it evicted:\n%s", log)
	}

	// Its changes were committed by the eviction: a kill -9 now (with
	// group commits an hour apart) keeps them, and the restart has no
	// client to wait for.
	c.Kill9(mdt)
	c.Restart(mdt)
	s := waitCounters(t, mdt.Addr, "the end of recovery", func(s map[string]int64) bool { return s["recovery_status"] == 0 })
	if s["recovery_clients_known"] != 0 {
		t.Fatalf("the restart waited for clients: %v", s)
	}
	_, mc := c.MountAt("clientC")
	for i := 0; i < 3; i++ {
		if got := readFile(t, filepath.Join(mc, "a", fmt.Sprint(i))); string(got) != fmt.Sprint("A", i) {
			t.Fatalf("A's file %d after the restart: %q", i, got)
		}
	}
}
