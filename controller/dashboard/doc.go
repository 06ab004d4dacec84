// Package dashboard is sluice's web page, served by `sluice run` at /ui/:
// the rollouts list, one rollout's timeline, traffic, routes, analysis
// plots and events, and the operator commands. It is three hand-written
// static files (static/) embedded in the binary; the page reads the HTTP
// API (/api/v1/...) like any other client, so the package holds no Go
// logic beyond serving the files.
//
// The plots are inline SVG drawn by app.js rather than a vendored chart
// library: a line of at most a few dozen measurements and two threshold
// lines take about sixty lines of code, less than any library's licence
// and loader would add to the bytes shipped.
package dashboard
