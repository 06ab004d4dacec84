// Command bench measures xDS fan-out: how fast one weight change reaches N
// ADS streams. It runs each server implementation and the clients as
// separate processes (this binary re-executed), side by side in one run:
//
//	floor   the clients' own floor: a server whose streams already hold the
//	        encoded response and only write it (no snapshot, no lookup)
//	stock   go-control-plane's server with its snapshot cache
//	sluice  gateway.Server
//
// Each client stream subscribes like a gRPC client of one host (LDS, then
// RDS), ACKs every response, and reports when it received the changed route
// configuration and when it sent the ACK. The wall clock is shared by all
// processes on the machine. Memory per idle stream is the server's heap and
// stack growth after GC, divided by N.
//
//	go run ./gateway/bench -n 1000,10000 -changes 7
package main
