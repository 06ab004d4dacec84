// Package charttest tests the Helm chart charts/sluice.
package charttest
