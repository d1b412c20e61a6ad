package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/syncio"
)

// progressBar shows how far long work has come: redrawn in place on a
// terminal, a line every few seconds otherwise (a log, a pipe).
type progressBar struct {
	w        io.Writer
	terminal bool
	last     time.Time
	shown    bool
	lastText string
}

func newProgressBar(w io.Writer) *progressBar {
	term := false
	inner := w
	if sw, ok := w.(*syncio.Writer); ok {
		inner = sw.Unwrap()
	}
	if f, ok := inner.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			term = true
		}
	}
	return &progressBar{w: w, terminal: term}
}

// barWidth is the bar's width in cells.
const barWidth = 30

// show shows done of total, and what they are.
func (p *progressBar) show(done, total int, what string) {
	frac := 1.0
	if total > 0 {
		frac = min(1, float64(done)/float64(total))
	}
	filled := int(frac * barWidth)
	text := fmt.Sprintf("[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), done, total, printable(what))
	if text == p.lastText {
		return
	}
	switch {
	case p.terminal:
		fmt.Fprintf(p.w, "\r\033[K%s", text)
	case time.Since(p.last) >= 2*time.Second || done == total:
		fmt.Fprintln(p.w, text)
		p.last = time.Now()
	default:
		return
	}
	p.shown, p.lastText = true, text
}

// done ends the bar's line.
func (p *progressBar) done() {
	if p.terminal && p.shown {
		fmt.Fprintln(p.w)
	}
}
