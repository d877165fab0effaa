package fs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/stripefs/stripefs/layout"
)

// TestStripedDirReaddirWhileChanging reads a directory striped over 3
// MDTs page by page (small pages, so every page boundary and stripe
// boundary is crossed) while other goroutines create and remove names in
// it: every name present throughout shows exactly once in every pass.
// Then the rules of removal: not while a stripe holds anything.
func TestStripedDirReaddirWhileChanging(t *testing.T) {
	c := start(t, 3, 2)
	ctx := context.Background()
	if err := c.Setxattr(ctx, root, "stripefs.mkdir", []byte("name=s mdt_index=2 mdt_count=3 mode=755"), 0); err != nil {
		t.Fatal(err)
	}
	s, err := c.Lookup(ctx, root, "s")
	if err != nil {
		t.Fatal(err)
	}
	if !s.FID.IsStripedDir() || s.FID.MDT() != 2 {
		t.Fatalf("mkdir -c 3 -i 2 made %s", s.FID)
	}
	const stable = 300
	for i := 0; i < stable; i++ {
		if _, _, err := c.Create(ctx, s.FID, fmt.Sprint("f", i), 0o644, 0, true, false, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ {
		if _, err := c.Mkdir(ctx, s.FID, fmt.Sprint("d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := fmt.Sprintf("churn%d-%d", g, i%50)
				if i/50%2 == 0 {
					c.Create(ctx, s.FID, n, 0o644, 0, true, false, 0)
				} else {
					c.Unlink(ctx, s.FID, n)
				}
			}
		}()
	}
	for pass := 0; pass < 5; pass++ {
		seen := map[string]int{}
		var cookie uint64
		for {
			ents, eof, err := c.Readdir(ctx, s.FID, cookie, 7, pass%2 == 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				seen[e.Name]++
				if e.Cookie <= cookie {
					t.Fatalf("pass %d: cookie %#x after %#x", pass, e.Cookie, cookie)
				}
				cookie = e.Cookie
			}
			if eof {
				break
			}
		}
		for i := 0; i < stable; i++ {
			if n := fmt.Sprint("f", i); seen[n] != 1 {
				t.Fatalf("pass %d: %s seen %d times", pass, n, seen[n])
			}
		}
		if seen["."] != 1 || seen[".."] != 1 {
			t.Fatalf("pass %d: . and .. seen %d and %d times", pass, seen["."], seen[".."])
		}
	}
	close(stop)
	wg.Wait()

	a, err := c.Getattr(ctx, s.FID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Nlink != 2+6 {
		t.Fatalf("nlink %d, want 8", a.Nlink)
	}
	d, err := c.Lookup(ctx, s.FID, "d3")
	if err != nil {
		t.Fatal(err)
	}
	if up, err := c.Parent(ctx, d.FID); err != nil || up.FID != s.FID || up.Nlink != 8 {
		t.Fatalf("parent of a subdirectory: %v %v", up, err)
	}
	// Same stripe: renamed now. Different stripes: the cross-MDT path.
	src := "f1"
	var same, other string
	for i := 0; same == "" || other == ""; i++ {
		n := fmt.Sprint("r", i)
		if layout.DirStripe(n, 3) == layout.DirStripe(src, 3) {
			same = n
		} else {
			other = n
		}
	}
	if err := c.Rename(ctx, s.FID, src, s.FID, same, 0); err != nil {
		t.Fatalf("rename within a stripe: %v", err)
	}
	if _, err := c.Lookup(ctx, s.FID, same); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, s.FID, same, s.FID, other, 0); err != nil {
		t.Fatalf("rename across stripes: %v", err)
	}
	if err := c.Rmdir(ctx, root, "s"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a non-empty striped directory: %v", err)
	}
	var cookie uint64
	for {
		ents, eof, err := c.Readdir(ctx, s.FID, cookie, 100, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			cookie = e.Cookie
			switch {
			case e.Name == "." || e.Name == "..":
			case e.Mode == syscall.S_IFDIR:
				err = c.Rmdir(ctx, s.FID, e.Name)
			default:
				err = c.Unlink(ctx, s.FID, e.Name)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if eof {
			break
		}
	}
	if err := c.Rmdir(ctx, root, "s"); err != nil {
		t.Fatalf("rmdir of the emptied striped directory: %v", err)
	}
	if _, err := c.Getattr(ctx, s.FID); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("master after rmdir: %v", err)
	}
}
