package mds

// hooks are the points where a test may hold an MDT to order events
// that are otherwise a race to set up; a production MDT has noHooks.
type hooks interface {
	// beforeOwnPart runs on a coordinator of a cross-MDT operation once
	// its participants applied their parts, before it applies its own.
	beforeOwnPart()
	// syncsHeld reports whether the group commit and the sweeper (which
	// syncs too) are held: a change not yet durable stays so until an
	// operation that needs it durable syncs.
	syncsHeld() bool
	// pushGate, until closed, holds every push of an async mkdir (and the
	// sweeper's redo of them): a push that comes late. Nil holds none.
	pushGate() <-chan struct{}
}

type noHooks struct{}

func (noHooks) beforeOwnPart()  {}
func (noHooks) syncsHeld() bool { return false }

func (noHooks) pushGate() <-chan struct{} { return nil }

// pushesHeld reports whether a test holds the pushes back.
func (m *MDT) pushesHeld() bool {
	gate := m.hooks.pushGate()
	if gate == nil {
		return false
	}
	select {
	case <-gate:
		return false
	default:
		return true
	}
}
