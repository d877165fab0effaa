package child

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is its own child: CHILD_MODE says how it behaves.
func TestMain(m *testing.M) {
	switch os.Getenv("CHILD_MODE") {
	case "":
		os.Exit(m.Run())
	case "ready": // says two things, then that it is ready, and stops on SIGTERM
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		fmt.Println("metrics on http://x")
		fmt.Println("warming up")
		fmt.Println("ready on 127.0.0.1:4242")
		fmt.Fprintln(os.Stderr, "serving")
		<-sig
		fmt.Fprintln(os.Stderr, "stopped cleanly")
		os.Exit(0)
	case "die": // fails before it is ready
		fmt.Fprintln(os.Stderr, "cannot open the database: no space left on device")
		os.Exit(3)
	case "silent": // never ready
		time.Sleep(time.Hour)
	case "stubborn": // ready, but ignores SIGTERM
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready on here")
		time.Sleep(time.Hour)
	}
}

func config(t *testing.T, mode string) Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Name: mode, Path: exe, Env: append(os.Environ(), "CHILD_MODE="+mode),
		Log: filepath.Join(t.TempDir(), mode+".log"), Timeout: 5 * time.Second,
		Ready: func(line string) (string, bool) {
			addr, ok := strings.CutPrefix(line, "ready on ")
			return addr, ok
		},
	}
}

func TestReadyAndStop(t *testing.T) {
	cfg := config(t, "ready")
	var seen []string
	cfg.Line = func(l string) { seen = append(seen, l) }
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.ReadyLine() != "127.0.0.1:4242" || len(seen) != 2 || seen[0] != "metrics on http://x" {
		t.Fatalf("ready %q, lines before %q", p.ReadyLine(), seen)
	}
	if !p.Running() {
		t.Fatal("not running once ready")
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("running after Stop")
	}
	if tail := Tail(cfg.Log, 1); tail != "stopped cleanly" {
		t.Fatalf("the log ends %q", tail)
	}
}

func TestFailures(t *testing.T) {
	for _, c := range []struct {
		mode, want string
		ctx        func() (context.Context, context.CancelFunc)
	}{
		{"die", "exited before it was ready (exit status 3); its log", nil},
		{"silent", "not ready after 300ms", nil},
		{"silent", "context deadline exceeded", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}},
	} {
		cfg := config(t, c.mode)
		cfg.Timeout = 300 * time.Millisecond
		ctx, cancel := context.Background(), func() {}
		if c.ctx != nil {
			cfg.Timeout = time.Minute
			ctx, cancel = c.ctx()
		}
		start := time.Now()
		p, err := Start(ctx, cfg)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) || p != nil {
			t.Errorf("%s: %v, want an error with %q", c.mode, err, c.want)
		}
		if c.mode == "die" && !strings.Contains(err.Error(), "no space left on device") {
			t.Errorf("die: the error does not quote the log: %v", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s: Start took %v", c.mode, time.Since(start))
		}
	}
}

func TestStopKillsStubborn(t *testing.T) {
	p, err := Start(context.Background(), config(t, "stubborn"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(200 * time.Millisecond); !errors.Is(err, ErrKilled) {
		t.Fatalf("Stop of a child that ignores SIGTERM: %v", err)
	}
	if p.Running() {
		t.Fatal("still running")
	}
}
