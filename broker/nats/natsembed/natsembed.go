package natsembed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/internal/defaults"
)

// LockFile is the file in Config.Dir that the embedded broker locks while
// it runs, and where it writes its process id.
const LockFile = "weir-embedded.lock"

// ErrDirInUse is wrapped by Open's error when another Broker, of this
// process or of another, runs the embedded server on the directory: two
// servers on one directory would each write the same stream files,
// losing messages and damaging the files.
var ErrDirInUse = errors.New("natsembed: the embedded broker's directory is in use")

// dirInUseHint ends ErrDirInUse's message.
const dirInUseHint = "one process at a time can run the embedded broker on a directory; " +
	"to share one broker between processes, run a NATS server (nats://...) or RabbitMQ (amqp://...) and point each at it"

// Defaults of Config.
const (
	DefaultHost         = "127.0.0.1"
	DefaultStartTimeout = 10 * time.Second
)

// Config configures the NATS server that Open starts in the process.
type Config struct {
	// Dir is the directory where JetStream keeps its streams (under
	// Dir/jetstream). Required; made if missing. A server started again on
	// the same Dir finds its streams, messages and consumers there. One
	// Broker at a time, in one process, may use a Dir: it holds a lock on
	// Dir/weir-embedded.lock (flock; released when the Broker closes or
	// its process dies), and Open fails with ErrDirInUse while another
	// holds it.
	Dir string
	// Host is the address the server listens on for clients. Default
	// 127.0.0.1: the machine's own processes only.
	Host string
	// Port is the port the server listens on. Zero, the default, takes a
	// free one, which Broker.URL names.
	Port int
	// MaxStore bounds the bytes JetStream keeps in Dir. Zero, the default,
	// lets the server take up to three quarters of the disk's free space.
	MaxStore int64
	// StartTimeout bounds how long Open waits for the server to take
	// connections, its streams recovered from Dir. Default 10 s.
	StartTimeout time.Duration
	// Broker configures the driver over the server (see nats.Config). Its
	// URL is ignored: the Broker connects to the embedded server. Its
	// Logger (default slog.Default()) also receives the server's log, its
	// notices at debug level.
	Broker nats.Config
}

// withDefaults returns c with its defaults, or an error naming the bad
// field.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Dir == "":
		return c, errors.New("natsembed: Config.Dir is empty; JetStream needs a directory for its streams")
	case c.Port < 0 || c.Port > 65535:
		return c, fmt.Errorf("natsembed: Config.Port %d is not a port", c.Port)
	}
	if err := cmp.Or(
		defaults.Set("natsembed: Config.MaxStore", &c.MaxStore, 0),
		defaults.Set("natsembed: Config.StartTimeout", &c.StartTimeout, DefaultStartTimeout),
	); err != nil {
		return c, err
	}
	c.Host = cmp.Or(c.Host, DefaultHost)
	c.Broker.Logger = cmp.Or(c.Broker.Logger, slog.Default())
	return c, nil
}

// Broker is a nats.Broker connected to a NATS server that runs in the
// process. Closing it shuts the server down.
type Broker struct {
	*nats.Broker
	srv *embedded
}

var (
	_ broker.Broker       = (*Broker)(nil)
	_ broker.Connectivity = (*Broker)(nil)
)

// Open starts a NATS server with JetStream in the process, its streams
// stored in cfg.Dir, and returns a Broker connected to it over the
// loopback interface. Closing the Broker shuts the server down.
//
// This is weir's single-machine broker: the same server and the same
// driver as against a NATS deployment (nats.Open), with its durable
// streams, msg-id dedupe and delivery limits. It serves one process per
// directory: a second Open on cfg.Dir, in this process or another, fails
// with an error wrapping ErrDirInUse until the first Broker closes (or
// its process dies). Processes that share a broker need a NATS server of
// their own (nats.Open) or RabbitMQ.
func Open(ctx context.Context, cfg Config) (*Broker, error) {
	srv, err := start(cfg)
	if err != nil {
		return nil, err
	}
	bc := srv.cfg.Broker
	bc.URL = srv.url()
	b, err := nats.Open(ctx, bc)
	if err != nil {
		return nil, errors.Join(err, srv.shutdown())
	}
	return &Broker{Broker: b, srv: srv}, nil
}

// URL is the embedded server's client URL, nats://host:port, for other
// connections to the same server (nats.Open with it as Config.URL). It
// stays the same across Restart.
func (b *Broker) URL() string { return b.srv.url() }

// Restart shuts the server down and starts it again on the same port and
// directory, as an operator's restart (or a crash) would: the Broker, and
// the other connections to URL, reconnect by themselves. Tests use it.
func (b *Broker) Restart() error { return b.srv.restart() }

// Close closes the Broker's connection, then shuts the server down and
// releases the directory. Consumers return nats.ErrClosed. Calling it
// again returns the first call's result.
func (b *Broker) Close() error {
	err := b.Broker.Close()
	return errors.Join(err, b.srv.shutdown())
}

// embedded is the in-process server of an Open Broker.
type embedded struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	srv  *server.Server
	port int      // the port taken at the first start, kept across restarts
	lock *dirLock // held until shutdown
	// shutdownErr is the first shutdown's result, which later ones return.
	shutdownErr error
	stopped     bool
}

// start starts the server of cfg, its defaults filled in, on cfg.Dir.
func start(cfg Config) (*embedded, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	e := &embedded{cfg: cfg, port: cfg.Port, log: cfg.Broker.Logger.With(slog.String("nats_server", "embedded")), lock: lock}
	if err := e.start(); err != nil {
		return nil, errors.Join(err, lock.release())
	}
	return e, nil
}

// start starts the server. e.mu is held, or e not yet shared.
func (e *embedded) start() error {
	port := e.port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName:        "weir-embedded",
		Host:              e.cfg.Host,
		Port:              port,
		JetStream:         true,
		StoreDir:          e.cfg.Dir,
		JetStreamMaxStore: e.cfg.MaxStore,
		NoSigs:            true,
		NoLog:             true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("natsembed: embedded server: %w", err)
	}
	srv.SetLoggerV2(serverLog{e.log}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(e.cfg.StartTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("natsembed: embedded server on %s, store %s: not ready within %v",
			net.JoinHostPort(e.cfg.Host, strconv.Itoa(e.port)), e.cfg.Dir, e.cfg.StartTimeout)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("natsembed: embedded server, store %s: JetStream did not start (see the server's log)", e.cfg.Dir)
	}
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		e.port = a.Port
	}
	e.srv = srv
	return nil
}

// url is the server's client URL.
func (e *embedded) url() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return "nats://" + net.JoinHostPort(e.cfg.Host, strconv.Itoa(e.port))
}

// shutdown stops the server, waits until it stopped, and releases the
// directory. Later calls return the first one's result.
func (e *embedded) shutdown() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return e.shutdownErr
	}
	e.stopped = true
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		e.srv = nil
	}
	e.shutdownErr = e.lock.release()
	e.lock = nil
	return e.shutdownErr
}

// restart shuts the server down and starts it again on the same port and
// directory.
func (e *embedded) restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || e.srv == nil {
		return errors.New("natsembed: restart: the embedded server is shut down")
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.srv = nil
	return e.start()
}

// serverLog passes the server's log to slog.
type serverLog struct{ log *slog.Logger }

func (l serverLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLog) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l serverLog) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLog) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLog) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLog) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
