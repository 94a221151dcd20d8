package parley

import "sync"

// queue hands values from the dispatch goroutine to a reader through a channel without ever
// blocking the dispatch goroutine: what the reader has not taken yet waits in a slice. After
// close the reader still gets every value pushed before it, then the channel closes.
type queue[T any] struct {
	mutex  sync.Mutex
	in     chan T
	out    chan T
	closed bool
}

func newQueue[T any]() *queue[T] {
	q := &queue[T]{in: make(chan T), out: make(chan T)}
	go q.forward()
	return q
}

func (q *queue[T]) forward() {
	var waiting []T
	in := q.in
	for in != nil || len(waiting) > 0 {
		if len(waiting) == 0 {
			value, ok := <-in
			if !ok {
				break
			}
			waiting = append(waiting, value)
			continue
		}
		select {
		case value, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			waiting = append(waiting, value)
		case q.out <- waiting[0]:
			var zero T
			waiting[0] = zero
			waiting = waiting[1:]
		}
	}
	close(q.out)
}

// push queues a value; after close it is dropped.
func (q *queue[T]) push(value T) {
	q.mutex.Lock()
	defer q.mutex.Unlock()
	if !q.closed {
		q.in <- value
	}
}

func (q *queue[T]) close() {
	q.mutex.Lock()
	defer q.mutex.Unlock()
	if !q.closed {
		q.closed = true
		close(q.in)
	}
}
