package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

const benchHost = "bench.internal"

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "server":
			exit(serverMain(os.Args[2:]))
		case "clients":
			exit(clientsMain(os.Args[2:]))
		}
	}
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	ns := fs.String("n", "1000,10000", "stream counts, comma separated")
	impls := fs.String("impl", "floor,stock,sluice", "server implementations, comma separated")
	changes := fs.Int("changes", 7, "weight changes per run (the median is reported)")
	perProc := fs.Int("per-process", 5000, "client streams per client process (one connection each)")
	variants := fs.String("xds", "sotw,delta", "xDS variants of the client streams, comma separated: sotw (state of the world), delta (incremental); one after the other")
	_ = fs.Parse(os.Args[1:])
	var counts []int
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			exit(fmt.Errorf("bad -n %q", s))
		}
		counts = append(counts, n)
	}
	var deltas []bool
	for _, v := range strings.Split(*variants, ",") {
		switch strings.TrimSpace(v) {
		case "sotw":
			deltas = append(deltas, false)
		case "delta":
			deltas = append(deltas, true)
		default:
			exit(fmt.Errorf("bad -xds %q: sotw or delta", v))
		}
	}
	exit(run(counts, strings.Split(*impls, ","), deltas, *changes, *perProc))
}

func exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
