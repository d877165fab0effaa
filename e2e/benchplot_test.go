package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The benchmarks draw what they measured with --plot, and show a
// progress bar on a terminal (never with --json, nor when not a
// terminal).
func TestBenchPlotAndProgress(t *testing.T) {
	c, mnt := mount(t)
	dir := t.TempDir()
	md, ior := filepath.Join(dir, "mdtest.svg"), filepath.Join(dir, "ior.svg")
	sfRun(t, c, "bench", "mdtest", "-d", filepath.Join(mnt, "md"), "-n", "30", "--plot", md)
	sfRun(t, c, "bench", "ior", "-o", filepath.Join(mnt, "ior"), "-t", "1m", "-b", "8m", "--plot", ior)
	for file, words := range map[string][]string{md: {"file creation", "directory removal", "ops/s"}, ior: {"write", "read", "MiB/s"}} {
		b, err := os.ReadFile(file)
		must(t, err)
		for _, w := range append(words, "<svg") {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to give the benchmark a terminal")
	}
	run := func(json string) string {
		cmd := c.Bin + " bench ior -o " + filepath.Join(mnt, "bar") + " -t 1m -b 256m " + json
		out, err := exec.Command("script", "-qec", cmd, "/dev/null").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	os.Setenv("STRIPEFS_PROGRESS_AFTER", "0s")
	defer os.Unsetenv("STRIPEFS_PROGRESS_AFTER")
	if out := run(""); !barRE.MatchString(out) {
		t.Errorf("no progress bar on a terminal:\n%q", out)
	}
	if out := run("--json"); barRE.MatchString(out) {
		t.Errorf("a progress bar with --json:\n%q", out)
	}
	if out := sfRun(t, c, "bench", "ior", "-o", filepath.Join(mnt, "pipe"), "-t", "1m", "-b", "8m"); barRE.MatchString(out) {
		t.Errorf("a progress bar without a terminal:\n%q", out)
	}
}

// barRE matches a progress bar's line: "ior  42% |████   |".
var barRE = regexp.MustCompile(`ior\s+\d+% \|`)
