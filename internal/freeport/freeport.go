// Package freeport finds a TCP port on loopback that is free now, for the
// test helpers that start a real peer (Postgres, geth) which must be told
// its port before it listens.
package freeport

import "net"

// Loopback returns a TCP port on 127.0.0.1 that the OS handed out and
// that is free again when it returns (another process may still take it
// before the peer binds it).
func Loopback() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
