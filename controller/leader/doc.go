// Package leader elects one acting sluice replica with a Lease
// (client-go's leaderelection, resourcelock.LeaseLock) and fences its
// writes: Elector.Check says whether this replica may still write, which
// it stops saying as soon as its lease is not fresh enough that no other
// replica can hold it yet, before the lease expires for the others.
package leader
