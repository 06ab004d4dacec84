// Package alert owns sluice's outgoing notifications: the Alert JSON of
// DESIGN §7, the sinks that deliver it (a generic webhook, a Slack-compatible
// message, Alertmanager's /api/v2/alerts) and the Dispatcher that drains a
// durable outbox into every sink at least once.
//
// Delivery is at least once per sink and deduplicated by the alert id: the
// producer (the runner) enqueues an alert into the Outbox, which is the
// controller store in production, and each sink has its own worker that sends
// the sink's pending alerts in order and marks them delivered. A failing sink
// backs off exponentially without delaying the other sinks, and because the
// outbox is durable, alerts pending when the process dies are sent after it
// restarts.
//
// Sink URLs often hold the credential (a Slack webhook's path, a token
// query, user info), so logs, errors and metrics show a sink by its kind
// and RedactURL form only; each delivery attempt is bounded by the sink's
// timeout and counted in sluice_alert_delivery_failures_total when it
// fails.
package alert
