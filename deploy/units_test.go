// Package deploy holds what a site installs beside the binary: systemd
// units (systemd/) and a Grafana dashboard (grafana/). Its test checks
// the units with systemd's own verifier.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stripefs/stripefs/internal/testcluster"
)

// The units pass systemd-analyze verify: syntax, directives, the
// hardening options, and that ExecStart runs a real stripefs (the one
// just built, in place of /usr/local/bin/stripefs).
func TestSystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze (.ci/run installs systemd)")
	}
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	units, err := filepath.Glob("systemd/*.service")
	if err != nil || len(units) != 3 {
		t.Fatalf("units %v: %v", units, err)
	}
	units = append(units, "systemd/mnt-stripefs.mount")
	var names []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "Type=notify") && strings.HasSuffix(u, ".service") {
			t.Errorf("%s is not Type=notify", u)
		}
		name := strings.Replace(filepath.Base(u), "@.", "@0.", 1) // an instance of a template
		b = []byte(strings.ReplaceAll(string(b), "/usr/local/bin/stripefs", bin))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	cmd := exec.Command(analyze, append([]string{"verify"}, names...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
