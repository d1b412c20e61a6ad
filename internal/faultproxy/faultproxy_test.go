package faultproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/faultproxy"
)

// echo serves lines back on a free loopback port.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := r.ReadString('\n')
	return err
}

func TestCutAndRestore(t *testing.T) {
	p, err := faultproxy.New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if err := roundTrip(c, r); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := roundTrip(c, r); err == nil {
		t.Fatal("a connection open before the cut still works")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		if err := roundTrip(c2, bufio.NewReader(c2)); err == nil {
			t.Fatal("a new connection works while cut")
		}
	}
	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c3, bufio.NewReader(c3)); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}
