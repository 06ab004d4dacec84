package alert

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// Slack is the body of a Slack-compatible incoming webhook.
type Slack struct {
	Text string `json:"text"`
}

// SlackMessage renders a one-line readable message, e.g.
// ":x: rollout-aborted default/checkout shop/checkout:v2 (9f8d111): analysis
// success-rate failed: result 0.91 < 0.99 [weights stable 100 / canary 0]".
func SlackMessage(a Alert) Slack {
	// Slack reads <...> as links and & as an entity; its docs ask senders to
	// escape exactly these three.
	return Slack{Text: slackEscaper.Replace(Line(a))}
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Line is the alert as one human-readable line.
func Line(a Alert) string {
	var b strings.Builder
	switch a.Severity {
	case SeverityError:
		b.WriteString(":x: ")
	case SeverityWarning:
		b.WriteString(":warning: ")
	default:
		b.WriteString(":information_source: ")
	}
	fmt.Fprintf(&b, "%s %s", a.Event, a.Rollout)
	if a.Version != "" {
		b.WriteString(" " + a.Version)
	}
	if a.Commit != "" {
		c := a.Commit
		if len(c) > ShortCommit {
			c = c[:ShortCommit]
		}
		b.WriteString(" (" + c + ")")
	}
	if a.Reason != "" {
		b.WriteString(": " + a.Reason)
	}
	if a.Metric != "" {
		fmt.Fprintf(&b, " [metric %s", a.Metric)
		if a.Value != "" {
			b.WriteString(" = " + a.Value)
		}
		if a.Condition != "" {
			b.WriteString(", condition " + a.Condition)
		}
		b.WriteString("]")
	}
	// An alert about a file has no traffic to report.
	if a.Weights != (api.Weights{}) {
		fmt.Fprintf(&b, " [weights stable %d / canary %d]", a.Weights.Stable, a.Weights.Canary)
	}
	if a.TraceID != "" {
		b.WriteString(" [trace " + a.TraceID + "]")
	}
	return b.String()
}

// AlertmanagerAlert is one element of the POST /api/v2/alerts body.
type AlertmanagerAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// ToAlertmanager maps an alert to Alertmanager's model: labels alertname
// (the event), rollout, namespace, severity, commit (its 7-character
// prefix), and id so that two logical alerts never merge while a
// re-delivery of one does; the reason and the details (and the trace id)
// go into annotations.
// commit is a label so that an alert storm (one commit aborting a thousand
// rollouts) folds into one notification with group_by [alertname, commit];
// it adds no cardinality beyond id's.
func ToAlertmanager(a Alert) AlertmanagerAlert {
	commit := a.Commit
	if len(commit) > ShortCommit {
		commit = commit[:ShortCommit]
	}
	labels := map[string]string{
		"alertname": string(a.Event),
		"rollout":   a.Rollout,
		"severity":  string(a.Severity),
		"commit":    commit,
		"id":        a.ID,
	}
	// A rollout is "namespace/name"; a file path that cannot be tied to a
	// rollout has no namespace, and Alertmanager rejects empty labels.
	if ns, ok := namespaceOf(a.Rollout); ok {
		labels["namespace"] = ns
		// A multi-cluster rollout's part ("ns/name@eu-2") names its
		// cluster, so that routes can send each cluster's alerts to its
		// own team.
		labels["cluster"] = api.ParseKey(a.Rollout).Cluster()
	}
	for k, v := range labels {
		if v == "" {
			delete(labels, k)
		}
	}
	ann := map[string]string{
		"summary":     Line(a),
		"description": a.Reason,
		"reason":      a.Reason,
		"version":     a.Version,
		"commit":      a.Commit,
		"metric":      a.Metric,
		"value":       a.Value,
		"condition":   a.Condition,
		"traceId":     a.TraceID,
	}
	if a.Weights != (api.Weights{}) {
		ann["weights"] = fmt.Sprintf("stable %d / canary %d", a.Weights.Stable, a.Weights.Canary)
	}
	for k, v := range ann {
		if v == "" {
			delete(ann, k)
		}
	}
	return AlertmanagerAlert{Labels: labels, Annotations: ann, StartsAt: a.Time}
}

// namespaceOf returns the namespace of a "namespace/name" rollout; a file
// path (the rollout of an alert about a file) has none.
func namespaceOf(rollout string) (string, bool) {
	ns, name, ok := strings.Cut(rollout, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") ||
		strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
		return "", false
	}
	return ns, true
}
