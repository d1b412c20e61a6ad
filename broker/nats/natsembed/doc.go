// Package natsembed runs weir's single-machine broker: a NATS server with
// JetStream inside the process, its streams kept in a directory, and the
// broker/nats driver connected to it over the loopback interface.
//
// It is a package of its own so that a program that talks to a NATS
// deployment (nats.Open) does not build the server in: importing
// broker/nats alone does not compile github.com/nats-io/nats-server.
//
// # One process per directory
//
// Open locks Dir/weir-embedded.lock (flock, released on Close or when the
// process dies); a second Open on the directory, in this process or
// another, fails with an error wrapping ErrDirInUse that names the
// holder. Processes that share a broker need a NATS server of their own,
// or RabbitMQ.
//
// # Other connections
//
// Broker.URL names the server, for other connections to it (a second
// nats.Broker, a tool); the port stays the same when the server restarts
// (Broker.Restart, which tests use to stand for an operator's restart).
package natsembed
