package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMdtestPhases runs mdtest over a local directory: all phases at
// once, then create, stat and remove as separate runs (-C, -T, -r), as
// mdtest users split them.
func TestMdtestPhases(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	names := func(r *MdtestResult) []string {
		var out []string
		for _, p := range r.Phases {
			if p.Ops != 2*3 || p.OpsPerS <= 0 {
				t.Errorf("%s: %d ops at %.0f/s, want 6", p.Phase, p.Ops, p.OpsPerS)
			}
			out = append(out, p.Phase)
		}
		return out
	}
	cfg := MdtestConfig{Dir: filepath.Join(dir, "all"), Items: 3, Iterations: 1, Procs: 2, Unique: true, MDTIndex: -2, TreeMDTIndex: -2}
	r, err := Mdtest(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(r); len(got) != 7 {
		t.Fatalf("phases %v, want all seven (mdtest's file read opens and closes even without -e)", got)
	}
	cfg.Dir = filepath.Join(dir, "split")
	left := func() int {
		n := 0
		for _, task := range []string{"mdtest_tree.0.0", "mdtest_tree.0.1"} {
			ents, _ := os.ReadDir(filepath.Join(cfg.Dir, task))
			n += len(ents)
		}
		return n
	}
	for _, step := range []struct {
		only  func(*MdtestConfig)
		want  []string
		items int
	}{
		{func(c *MdtestConfig) { c.Create = true }, []string{"directory creation", "file creation"}, 12},
		{func(c *MdtestConfig) { c.Stat = true }, []string{"directory stat", "file stat", "file read"}, 12},
		{func(c *MdtestConfig) { c.Remove = true }, []string{"directory removal", "file removal"}, 0},
	} {
		c := cfg
		step.only(&c)
		r, err := Mdtest(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(r); !slices.Equal(got, step.want) {
			t.Fatalf("phases %v, want %v", got, step.want)
		}
		if n := left(); n != step.items {
			t.Fatalf("after %v: %d items in the task directories, want %d", step.want, n, step.items)
		}
	}
}

// TestMdtestWriteRead: -w writes each file's bytes at creation and -e
// reads them back in a phase of its own, between stat and removal; a
// file shorter than -e asks is an error only when -w said otherwise.
func TestMdtestWriteRead(t *testing.T) {
	ctx := context.Background()
	cfg := MdtestConfig{Dir: t.TempDir(), Items: 4, Iterations: 1, Procs: 2, FilesOnly: true, MDTIndex: -2, TreeMDTIndex: -2,
		WriteBytes: 3901, ReadBytes: 3901, Create: true}
	if _, err := Mdtest(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(cfg.Dir, "mdtest_tree.0", "mdtest.file.1.3"))
	if err != nil || st.Size() != 3901 {
		t.Fatalf("a created file: %v, %v (want 3901 bytes)", st, err)
	}
	cfg.Create, cfg.Stat, cfg.Remove = false, false, false
	cfg.Dir = t.TempDir()
	r, err := Mdtest(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range r.Phases {
		got = append(got, p.Phase)
	}
	if want := []string{"file creation", "file stat", "file read", "file removal"}; !slices.Equal(got, want) {
		t.Fatalf("phases %v, want %v", got, want)
	}
	if r.Phase("file read") <= 0 {
		t.Fatal("no read rate")
	}
	cfg.ReadBytes, cfg.WriteBytes = 100, 10
	cfg.Dir = t.TempDir()
	if _, err := Mdtest(ctx, cfg); err != nil {
		t.Fatalf("-e 100 of 10-byte files: %v (mdtest reads what is there)", err)
	}
	cfg.DirsOnly, cfg.FilesOnly = true, false
	if err := cfg.Validate(); err == nil {
		t.Fatal("-e with -D accepted")
	}
}
