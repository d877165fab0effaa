package main

import (
	"fmt"
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notify tells systemd (a Type=notify unit's $NOTIFY_SOCKET) how the
// process is: daemon.SdNotifyReady once it serves, SdNotifyStopping when
// it begins to stop. Without systemd it does nothing.
func notify(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		slog.Warn(fmt.Sprintf("sd_notify %q: %v", state, err), "state", state)
	}
}
