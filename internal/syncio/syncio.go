// Package syncio holds writers that goroutines may share: a Writer that
// lets one Write through at a time to the writer it wraps, and a Buffer
// that goroutines write while another reads it (a log sink in tests).
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer lets one Write through at a time to the writer it wraps.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p to the wrapped writer, once no other Write is running.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Unwrap returns the writer w writes to.
func (w *Writer) Unwrap() io.Writer { return w.w }

// Buffer is a bytes.Buffer safe for concurrent use. The zero value is an
// empty buffer ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
