// Package testenv finds the local services that weir's integration tests
// talk to: PostgreSQL, RabbitMQ and NATS with JetStream.
//
// Each helper returns the service's URL, the default or the one set in the
// helper's override variable, after checking with a short TCP dial that
// something answers there:
//
//	helper    default                                                 override
//	Postgres  postgres://postgres@127.0.0.1:5432/test?sslmode=disable  WEIR_TEST_POSTGRES_URL
//	RabbitMQ  amqp://guest:guest@127.0.0.1:5672/                       WEIR_TEST_RABBITMQ_URL
//	NATS      nats://127.0.0.1:4222                                    WEIR_TEST_NATS_URL
//
// When nothing answers, the test is skipped with a message that starts
// with "SKIPPING:" and says how to turn the skip into a failure: set
// WEIR_REQUIRE_SERVICES=1, as .ci/run does, and the test fails instead, so
// CI cannot pass by skipping. An override that is not a URL with a host, or
// a WEIR_REQUIRE_SERVICES that is not a boolean, always fails the test.
//
// Int reads a test's size or seed set from outside (WEIR_CHAOS_KILLS,
// WEIR_PROCESS_JOBS), failing the test on a value that is not a whole
// number.
//
// The package reads the environment; it is for tests only.
package testenv
