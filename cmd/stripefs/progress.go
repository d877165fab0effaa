package main

import (
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/stripefs/stripefs/bench"
)

// progressAfter is how long a run goes before it gets a progress bar:
// short runs stay quiet. $STRIPEFS_PROGRESS_AFTER sets it (tests).
var progressAfter = 2 * time.Second

func init() {
	if d, err := time.ParseDuration(os.Getenv("STRIPEFS_PROGRESS_AFTER")); err == nil {
		progressAfter = d
	}
}

// showProgress draws m as a progress bar on stderr (schollz/progressbar)
// once the run has gone on for progressAfter, when stderr is a terminal
// and the output is not JSON; bytes says m counts bytes. Stop ends it.
func showProgress(m *bench.Meter, what string, bytes, asJSON bool) (stop func()) {
	if asJSON || !term.IsTerminal(int(os.Stderr.Fd())) {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-done:
			return
		case <-time.After(progressAfter):
		}
		_, total := m.Read()
		for ; total == 0; _, total = m.Read() { // the run has not said how much yet
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		bar := progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(what),
			progressbar.OptionShowBytes(bytes), progressbar.OptionShowCount(), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(), progressbar.OptionSetPredictTime(true))
		_ = bar.RenderBlank()
		for {
			n, total := m.Read()
			bar.ChangeMax64(total)
			_ = bar.Set64(n)
			select {
			case <-done:
				_ = bar.Clear()
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-ended }
}
