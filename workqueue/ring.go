package workqueue

// ring is a FIFO of slot numbers in a circular buffer whose size is a power
// of two. Unlike a re-sliced slice it reuses its storage, so a steady queue
// does not allocate.
type ring struct {
	buf  []int32
	head int32 // index of the oldest element
	n    int32 // number of elements
}

func (r *ring) len() int { return int(r.n) }

func (r *ring) push(v int32) {
	if int(r.n) == len(r.buf) {
		r.grow()
	}
	r.buf[int(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// pop removes and returns the oldest element; the ring must not be empty.
func (r *ring) pop() int32 {
	v := r.buf[r.head]
	r.head = (r.head + 1) & int32(len(r.buf)-1)
	r.n--
	return v
}

func (r *ring) grow() {
	size := max(16, 2*len(r.buf))
	buf := make([]int32, size)
	// Unwrap the old contents to the front of the new buffer.
	k := copy(buf, r.buf[r.head:])
	copy(buf[k:], r.buf[:r.head])
	r.buf = buf
	r.head = 0
}
