package fs

// recent remembers a value for each of the last n keys put, oldest out
// first: what a client must recall only for moments (a lock called back
// before its grant came, the size a released file reported), under keys
// that are not reused soon. Not safe for concurrent use.
type recent[K comparable, V any] struct {
	m    map[K]V
	ring []K
	next int
}

func newRecent[K comparable, V any](n int) recent[K, V] {
	return recent[K, V]{m: map[K]V{}, ring: make([]K, n)}
}

// put remembers v under k, replacing what k had.
func (r *recent[K, V]) put(k K, v V) {
	if _, ok := r.m[k]; !ok {
		var zero K
		if old := r.ring[r.next]; old != zero {
			delete(r.m, old)
		}
		r.ring[r.next] = k
		r.next = (r.next + 1) % len(r.ring)
	}
	r.m[k] = v
}

// get returns what k has, if it is still remembered.
func (r *recent[K, V]) get(k K) (V, bool) {
	v, ok := r.m[k]
	return v, ok
}
