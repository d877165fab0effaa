package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// POSIX ACLs with setfacl and getfacl (the acl package), as a Lustre
// site uses them: set and read back, enforced for users the ACL names
// by the kernel of two mounts and by the MDT for a mount that leaves
// checks to it, following chmod, and inherited from default ACLs on
// plain, remote and striped directories in place of the umask.

func facl(t *testing.T, tool string, args ...string) string {
	t.Helper()
	out, err := exec.Command(tool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// getfacl is the ACL of p in getfacl's short form without comments.
func getfacl(t *testing.T, args ...string) string {
	t.Helper()
	out := facl(t, "getfacl", append([]string{"-c", "-n", "-p"}, args...)...)
	return strings.Join(strings.Fields(out), " ")
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	must(t, err)
	return st.Mode()
}

func TestACLs(t *testing.T) {
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Fatal("setfacl is missing: install the acl package (.ci/run does)")
	}
	c, mnt := mount(t)
	_, mntB := c.MountAt("b")                                    // another client, its own kernel caches
	_, mntM := c.MountAt("m", "no_default_permissions", "noacl") // the MDT alone decides
	const bob, eve = 1001, 1002

	f := filepath.Join(mnt, "f")
	writeFile(t, f, []byte("secret"))
	must(t, os.Chmod(f, 0o640))
	for _, m := range []string{mnt, mntB, mntM} {
		if e := asUser(t, bob, bob, nil, "read "+filepath.Join(m, "f")); e != syscall.EACCES {
			t.Fatalf("bob reads a 0640 root file on %s: errno %v, want EACCES", m, e)
		}
	}

	facl(t, "setfacl", "-m", "u:1001:rw", f)
	if got, want := getfacl(t, f), "user::rw- user:1001:rw- group::r-- mask::rw- other::---"; got != want {
		t.Fatalf("getfacl after setfacl -m: %q, want %q", got, want)
	}
	if m := modeOf(t, f).Perm(); m != 0o660 {
		t.Fatalf("mode after setfacl: %o, want 660 (the group bits are the mask)", m)
	}
	for _, m := range []string{mnt, mntB, mntM} {
		p := filepath.Join(m, "f")
		if e := asUser(t, bob, bob, nil, "read "+p); e != 0 {
			t.Errorf("bob (named rw) reads on %s: errno %v", m, e)
		}
		if e := asUser(t, bob, bob, nil, "write "+p); e != 0 {
			t.Errorf("bob (named rw) opens for writing on %s: errno %v", m, e)
		}
		if e := asUser(t, eve, eve, nil, "read "+p); e != syscall.EACCES {
			t.Errorf("eve (other ---) reads on %s: errno %v, want EACCES", m, e)
		}
	}
	if got := getfacl(t, filepath.Join(mntB, "f")); !strings.Contains(got, "user:1001:rw-") {
		t.Errorf("the other mount's getfacl: %q", got)
	}

	// chmod rewrites the mask: bob's entry stays, and counts for nothing.
	must(t, os.Chmod(f, 0o600))
	if got, want := getfacl(t, f), "user::rw- user:1001:rw- #effective:--- group::r-- #effective:--- mask::--- other::---"; got != want {
		t.Errorf("getfacl after chmod 600: %q, want %q", got, want)
	}
	for _, m := range []string{mnt, mntB, mntM} {
		if e := asUser(t, bob, bob, nil, "read "+filepath.Join(m, "f")); e != syscall.EACCES {
			t.Errorf("bob after chmod 600 on %s: errno %v, want EACCES", m, e)
		}
	}

	// Only the owner (or root) sets an ACL.
	g := filepath.Join(mnt, "g")
	writeFile(t, g, nil)
	must(t, os.Chown(g, eve, eve))
	cmd := exec.Command("setfacl", "-m", "u:1001:rwx", g)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: bob, Gid: bob}}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Operation not permitted") {
		t.Errorf("bob sets an ACL on eve's file: %v %s, want EPERM", err, out)
	}

	// An ACL the mode can say is not kept; -b removes the rest.
	facl(t, "setfacl", "-m", "u::rwx,g::r-x,o::r--", g)
	if m := modeOf(t, g).Perm(); m != 0o754 {
		t.Errorf("mode after a minimal ACL: %o, want 754", m)
	}
	if out, _ := exec.Command("getfattr", "-n", "system.posix_acl_access", g).CombinedOutput(); !strings.Contains(string(out), "No such attribute") {
		t.Errorf("a minimal ACL was stored: %s", out)
	}
	facl(t, "setfacl", "-b", f)
	if got := getfacl(t, f); got != "user::rw- group::--- other::---" {
		t.Errorf("getfacl after setfacl -b: %q", got)
	}

	// Default ACLs, inherited in place of the umask, by plain, remote
	// and striped directories alike.
	plain := filepath.Join(mnt, "plain")
	must(t, os.Mkdir(plain, 0o755))
	remote := filepath.Join(mnt, "remote")
	sfRun(t, c, "mkdir", "-i", "1", remote)
	striped := filepath.Join(mnt, "striped")
	sfRun(t, c, "mkdir", "-c", "2", striped)
	for _, d := range []string{plain, remote, striped} {
		facl(t, "setfacl", "-d", "-m", "u:1001:rwx", d)
		facl(t, "setfacl", "-m", "u:1001:rwx", d)
		shell(t, "umask 077 && touch "+d+"/new && mkdir "+d+"/sub && touch "+d+"/sub/deeper")
		if got, want := getfacl(t, d+"/new"), "user::rw- user:1001:rwx #effective:rw- group::r-x #effective:r-- mask::rw- other::r--"; got != want {
			t.Errorf("%s/new: getfacl %q, want %q", d, got, want)
		}
		if m := modeOf(t, d+"/new").Perm(); m != 0o664 {
			t.Errorf("%s/new: mode %o, want 664 (the default ACL, not umask 077)", d, m)
		}
		if got := getfacl(t, "-d", d+"/sub"); !strings.Contains(got, "user:1001:rwx") {
			t.Errorf("%s/sub: default ACL %q, want the parent's", d, got)
		}
		if got := getfacl(t, d+"/sub/deeper"); !strings.Contains(got, "user:1001:rwx") {
			t.Errorf("%s/sub/deeper: ACL %q, want the inherited entry", d, got)
		}
		for _, m := range []string{mnt, mntB, mntM} {
			rel, _ := filepath.Rel(mnt, d)
			if e := asUser(t, bob, bob, nil, "create "+filepath.Join(m, rel, "sub", "bob-"+filepath.Base(m))); e != 0 {
				t.Errorf("bob creates in %s/sub on %s: errno %v", d, m, e)
			}
		}
	}
	// Without a default ACL the MDT applies the umask the kernel sent.
	shell(t, "umask 077 && touch "+mnt+"/masked")
	if m := modeOf(t, mnt+"/masked").Perm(); m != 0o600 {
		t.Errorf("a file made with umask 077: mode %o, want 600", m)
	}
}

// shell runs a command line as root with sh.
func shell(t *testing.T, line string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", line).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}
