package netcut

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo serves one line back per line read.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
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
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDelayed: a round trip through a delayed proxy takes at least twice
// the delay, the bytes arrive whole and in order, and a cut ends it.
func TestDelayed(t *testing.T) {
	const delay = 50 * time.Millisecond
	p, err := StartDelayed(echo(t), delay)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	for _, msg := range []string{"one\n", "two\n", "three\n"} {
		t0 := time.Now()
		_, err := c.Write([]byte(msg))
		require.NoError(t, err)
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, msg, got)
		assert.GreaterOrEqual(t, time.Since(t0), 2*delay)
	}
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = r.ReadString('\n')
	assert.Error(t, err, "cut")
}
