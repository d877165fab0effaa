package recovery

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

// A step is one event fed to the machine and what it must answer. Steps
// are written as text so each table row reads like a log:
//
//	admit            → verdict of a non-replay request
//	replay C T       → verdict of client C's replay of transno T
//	poll C T         → verdict of a queued replay
//	replayed T       → the running replay (transno T) is over
//	done C           → C says replay done
//	bye C            → C disconnects cleanly
//	tick S           → S seconds after the start; want = evicted clients
//	cancel C T       → C's queued replay gives up
type step struct{ do, want string }

func run(t *testing.T, m *Machine, steps []step) {
	t.Helper()
	now := t0
	for i, s := range steps {
		f := strings.Fields(s.do)
		var got string
		arg := func(j int) uint64 {
			var v uint64
			fmt.Sscan(f[j], &v)
			return v
		}
		switch f[0] {
		case "admit":
			got = m.Admit().String()
		case "replay":
			got = m.Replay(f[1], arg(2)).String()
		case "poll":
			got = m.Poll(f[1], arg(2)).String()
		case "replayed":
			m.Replayed(arg(1), now)
		case "done":
			got = fmt.Sprint(m.ReplayDone(f[1], now))
		case "bye":
			m.Disconnect(f[1], now)
		case "cancel":
			m.Cancel(f[1], arg(2))
		case "tick":
			now = t0.Add(time.Duration(arg(1)) * time.Second)
			got = strings.Join(m.Tick(now), ",")
		case "recovering":
			got = fmt.Sprint(m.Recovering())
		default:
			t.Fatalf("step %d: unknown %q", i, s.do)
		}
		if s.want != "" && got != s.want {
			t.Fatalf("step %d %q: got %q, want %q", i, s.do, got, s.want)
		}
	}
}

func TestMachine(t *testing.T) {
	cases := []struct {
		name      string
		known     []string
		committed uint64
		steps     []step
		status    Status // Duration not compared
	}{
		{
			name: "no known clients: no window",
			steps: []step{
				{"recovering", "false"}, {"admit", "run"},
				// Nobody to replay to: a late replay is refused.
				{"replay x 5", "refuse"},
			},
			status: Status{Refused: 1},
		},
		{
			name: "all clients return", known: []string{"a", "b"}, committed: 10,
			steps: []step{
				{"admit", "wait"},
				// A replay of a change committed before the restart runs
				// at once: it orders nothing.
				{"replay a 9", "run"}, {"replayed 9", ""},
				{"replay a 11", "run"},  // next in line: nothing older can come
				{"replay b 12", "wait"}, // one at a time
				{"replayed 11", ""},
				{"poll b 12", "run"}, {"replayed 12", ""},
				{"done a", "true"}, {"done a", "false"},
				{"recovering", "true"}, {"admit", "wait"},
				{"done b", "true"},
				{"recovering", "false"}, {"admit", "run"},
				{"tick 100", ""}, // nobody is evicted after the end
			},
			status: Status{Known: 2, Recovered: 2, Replays: 3},
		},
		{
			name: "one never returns: timeout and eviction", known: []string{"a", "b"}, committed: 10,
			steps: []step{
				// a's 13 waits: 11 and 12 may be b's, and b has nothing
				// queued.
				{"replay a 13", "wait"},
				{"tick 29", ""}, {"poll a 13", "wait"}, {"admit", "wait"},
				{"tick 30", "b"},
				{"poll a 13", "run"}, {"replayed 13", ""},
				{"recovering", "true"}, // a has not said done
				{"done a", "true"}, {"recovering", "false"},
				// b comes back too late: its replays are refused, its
				// new requests run.
				{"replay b 11", "refuse"}, {"done b", "false"}, {"admit", "run"},
			},
			status: Status{Known: 2, Recovered: 1, Evicted: 1, Replays: 1, Refused: 1},
		},
		{
			name: "evicted while queued", known: []string{"a", "b"}, committed: 10,
			steps: []step{
				{"replay a 11", "run"},
				{"replay a 14", "wait"}, // a client may have several in flight
				{"replayed 11", ""},
				{"poll a 14", "wait"}, // b may hold 12 or 13
				{"tick 31", "b"},      // a is replaying: it gets until the hard end
				{"poll a 14", "run"},
				{"replay a 15", "wait"},
				{"tick 59", ""},
				{"tick 60", "a"}, // hard end: stuck mid-replay
				{"poll a 15", "refuse"},
				{"replayed 14", ""},
				{"recovering", "false"},
			},
			status: Status{Known: 2, Evicted: 2, Replays: 2},
		},
		{
			name: "new client during the window waits, the window does not wait for it", known: []string{"a"},
			steps: []step{
				{"admit", "wait"},     // the new client's request
				{"done new", "false"}, // unknown: changes nothing
				{"recovering", "true"},
				{"done a", "true"},
				{"admit", "run"},
			},
			status: Status{Known: 1, Recovered: 1},
		},
		{
			name: "replay ordering across two clients by transno", known: []string{"a", "b"}, committed: 100,
			steps: []step{
				// Before the crash: a created f (101), b renamed f (102),
				// a wrote attrs (104), b unlinked (103). b's rename comes
				// first on the wire, and must wait for a's create.
				{"replay b 102", "wait"},
				{"replay a 101", "run"},
				{"poll b 102", "wait"}, // a's is running
				{"replayed 101", ""},
				{"poll b 102", "run"}, {"replayed 102", ""},
				{"replay a 104", "wait"}, // 103 may be b's: b has nothing queued yet
				{"replay b 103", "run"}, {"replayed 103", ""},
				{"poll a 104", "run"}, {"replayed 104", ""},
				{"done a", "true"}, {"done b", "true"},
				{"recovering", "false"},
			},
			status: Status{Known: 2, Recovered: 2, Replays: 4},
		},
		{
			name: "gap: the oldest runs once every awaited client has one queued", known: []string{"a", "b", "c"}, committed: 0,
			steps: []step{
				{"done c", "true"}, // c had nothing to replay
				{"replay b 7", "wait"},
				{"replay a 5", "run"}, // 1..4 were lost with nobody (or a gone client): a and b both queued
				{"replayed 5", ""},
				{"replay a 9", "wait"}, // b's 7 is older
				{"poll b 7", "run"}, {"replayed 7", ""},
				{"poll a 9", "wait"}, // b may still hold 8
				{"done b", "true"},
				{"poll a 9", "run"}, {"replayed 9", ""},
				{"done a", "true"},
			},
			status: Status{Known: 3, Recovered: 3, Replays: 3},
		},
		{
			name: "unknown client that replays joins the window", known: []string{"a"}, committed: 50,
			steps: []step{
				{"replay z 52", "wait"}, // 51 may be a's
				{"done a", "true"},
				{"poll z 52", "run"}, {"replayed 52", ""},
				{"recovering", "true"}, // z is awaited now
				{"done z", "true"}, {"recovering", "false"},
			},
			status: Status{Known: 2, Recovered: 2, Replays: 1},
		},
		{
			name: "clean disconnect during the window", known: []string{"a", "b"},
			steps: []step{
				{"bye a", ""}, {"recovering", "true"}, {"bye b", ""}, {"recovering", "false"},
			},
			status: Status{Known: 2, Recovered: 2},
		},
		{
			name: "cancelled replay no longer blocks", known: []string{"a", "b"}, committed: 10,
			steps: []step{
				{"replay a 12", "wait"},
				{"cancel a 12", ""},
				{"done b", "true"},
				{"replay a 13", "run"}, {"replayed 13", ""},
				{"done a", "true"}, {"recovering", "false"},
			},
			status: Status{Known: 2, Recovered: 2, Replays: 1},
		},
		{
			name: "replay after its own replay done is refused", known: []string{"a", "b"},
			steps: []step{
				{"done a", "true"}, {"replay a 3", "refuse"}, {"recovering", "true"},
			},
			status: Status{Recovering: true, Known: 2, Recovered: 1, Refused: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Config{Known: tc.known, Committed: tc.committed, Start: t0, Window: 30 * time.Second})
			run(t, m, tc.steps)
			st := m.Status(t0.Add(time.Hour))
			st.Duration = 0
			if st != tc.status {
				t.Fatalf("status %+v, want %+v", st, tc.status)
			}
		})
	}
}

func TestDuration(t *testing.T) {
	m := New(Config{Known: []string{"a"}, Start: t0, Window: 30 * time.Second})
	if d := m.Status(t0.Add(2 * time.Second)).Duration; d != 2*time.Second {
		t.Fatalf("open window: duration %v", d)
	}
	m.ReplayDone("a", t0.Add(3*time.Second))
	if d := m.Status(t0.Add(time.Hour)).Duration; d != 3*time.Second {
		t.Fatalf("closed window: duration %v", d)
	}
	m = New(Config{Known: []string{"a"}, Start: t0, Window: 30 * time.Second})
	if dl := m.Deadline(t0); dl != t0.Add(30*time.Second) {
		t.Fatalf("deadline %v", dl)
	}
	if dl := m.Deadline(t0.Add(30 * time.Second)); dl != t0.Add(60*time.Second) {
		t.Fatalf("hard deadline %v", dl)
	}
	m.Tick(t0.Add(31 * time.Second))
	if d := m.Status(t0.Add(time.Hour)).Duration; d != 31*time.Second {
		t.Fatalf("timed-out window: duration %v", d)
	}
}
