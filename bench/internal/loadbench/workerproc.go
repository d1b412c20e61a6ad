package loadbench

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// collector gathers what the worker processes of one system report,
// across their restarts.
type collector struct {
	mu      sync.Mutex
	done    int64     // handler completions of all incarnations
	started int64     // handler starts of all incarnations
	window  histogram // pickup latencies since the last sample
	phase   histogram // pickup latencies since the phase began
	// cpuExited is the CPU time (µs) of the incarnations that exited
	// (from wait4's rusage); cpuLive the last that the running one
	// reported.
	cpuExited, cpuLive int64
}

func (c *collector) add(startedDelta, doneDelta int64, buckets [][2]uint64, cpu int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started += startedDelta
	c.done += doneDelta
	for _, b := range buckets {
		c.window.addBucket(int(b[0]), b[1])
		c.phase.addBucket(int(b[0]), b[1])
	}
	c.cpuLive = cpu
}

func (c *collector) exited(cpu int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cpuExited += max(cpu, c.cpuLive)
	c.cpuLive = 0
}

// takeWindow returns the completions so far and the window's histogram,
// which it empties.
func (c *collector) takeWindow() (done int64, h histogram) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done, c.window.take()
}

// takePhase returns the phase's histogram and empties it.
func (c *collector) takePhase() histogram {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase.take()
}

func (c *collector) startedJobs() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

func (c *collector) cpu() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.cpuExited+c.cpuLive) * time.Microsecond
}

// workerProc runs a system's worker process, and runs it again after a
// kill.
type workerProc struct {
	spec     workerSpec
	col      *collector
	profile  string // directory of CPU profiles, or empty
	name     string // system-wN, for the profiles
	restarts int
	fin      *finishedWork // with spec.Finished: the work each incarnation finished

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
}

// start runs a worker process and waits until it has started its client.
func (w *workerProc) start() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	spec := w.spec
	if w.profile != "" {
		spec.Profile = filepath.Join(w.profile, fmt.Sprintf("%s-%d.pprof", w.name, w.restarts))
	}
	w.restarts++
	js, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), RoleEnv+"="+RoleWorker, SpecEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var finR, finW *os.File
	if spec.Finished {
		if finR, finW, err = os.Pipe(); err != nil {
			return err
		}
		cmd.ExtraFiles = []*os.File{finW} // descriptor 3 in the child
	}
	err = cmd.Start()
	if finW != nil {
		_ = finW.Close() // the child's copy is the only writer: its exit ends the reader
	}
	if err != nil {
		if finR != nil {
			_ = finR.Close()
		}
		return fmt.Errorf("start worker process: %w", err)
	}
	w.cmd, w.stdin, w.exited = cmd, stdin, make(chan struct{})
	var finReading chan struct{} // closed once the incarnation's finished work is all read
	if finR != nil {
		finReading = make(chan struct{})
		go func() {
			defer close(finReading)
			defer finR.Close()
			w.fin.read(finR)
		}()
	}
	ready := make(chan struct{})
	go w.read(stdout, ready, finReading)
	select {
	case <-ready:
		return nil
	case <-w.exited:
		return fmt.Errorf("the worker process exited before it started: %v", w.cmd.ProcessState)
	case <-time.After(time.Minute):
		w.kill()
		return errors.New("the worker process did not start within a minute")
	}
}

// read consumes the process's reports until it exits, then waits for it
// (and for finReading, when not nil, to be closed) and books its CPU
// time.
func (w *workerProc) read(stdout io.Reader, ready, finReading chan struct{}) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	var last report
	isReady := false
	for sc.Scan() {
		var r report
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		w.col.add(r.Started-last.Started, r.Done-last.Done, r.Hist, r.CPU)
		last = r
		if r.Ready && !isReady {
			isReady = true
			close(ready)
		}
	}
	_ = w.cmd.Wait()
	if finReading != nil {
		<-finReading // every record the process wrote is counted
	}
	var cpu int64
	if ru, ok := w.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = ru.Utime.Nano()/1e3 + ru.Stime.Nano()/1e3
	}
	w.col.exited(cpu)
	close(w.exited)
}

// kill SIGKILLs the process and waits for it to be gone.
func (w *workerProc) kill() {
	_ = w.cmd.Process.Kill()
	<-w.exited
}

// stop closes the process's standard input, which makes it stop its
// client and exit, and waits up to timeout before killing it.
func (w *workerProc) stop(timeout time.Duration) error {
	_ = w.stdin.Close()
	select {
	case <-w.exited:
	case <-time.After(timeout):
		w.kill()
		return errors.New("the worker process did not stop in time: killed")
	}
	if !w.cmd.ProcessState.Success() {
		return fmt.Errorf("the worker process ended with %v", w.cmd.ProcessState)
	}
	return nil
}

// finishedWork counts, per sequence number, the handlers that finished
// their job's work, across the worker process's restarts (see
// workerSpec.Finished).
type finishedWork struct {
	mu sync.Mutex
	n  map[int64]uint32
}

func newFinishedWork() *finishedWork { return &finishedWork{n: make(map[int64]uint32)} }

// read counts the records of r, 8 bytes each, until r ends.
func (f *finishedWork) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<16)
	var b [8]byte
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return
		}
		seq := int64(binary.LittleEndian.Uint64(b[:]))
		f.mu.Lock()
		f.n[seq]++
		f.mu.Unlock()
	}
}

// counts returns how many sequence numbers' work finished at least once
// and how many more than once.
func (f *finishedWork) counts() (once, twice int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.n {
		once++
		if c > 1 {
			twice++
		}
	}
	return once, twice
}
