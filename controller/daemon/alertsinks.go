package daemon

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/controller/alert"
)

// alertSinkSpecs lists the configured sinks: URLs given as flags, then
// URLs read from the --alert-*-file flags. A sink's outbox name is its
// kind and URL either way, so moving a URL from a flag into a file keeps
// its pending alerts.
func alertSinkSpecs(o Options) ([]alert.SinkOptions, error) {
	var specs []alert.SinkOptions
	add := func(kind alert.Kind, url string) {
		specs = append(specs, alert.SinkOptions{Kind: kind, URL: url})
	}
	for _, u := range o.AlertWebhooks {
		add(alert.KindWebhook, u)
	}
	for _, f := range o.AlertWebhookFiles {
		u, err := readURLFile("--alert-webhook-file", f)
		if err != nil {
			return nil, err
		}
		add(alert.KindWebhook, u)
	}
	slack, err := urlOrFile(o.AlertSlack, "--alert-slack-file", o.AlertSlackFile)
	if err != nil {
		return nil, err
	}
	if slack != "" {
		add(alert.KindSlack, slack)
	}
	am, err := urlOrFile(o.AlertmanagerURL, "--alertmanager-url-file", o.AlertmanagerURLFile)
	if err != nil {
		return nil, err
	}
	if am != "" {
		add(alert.KindAlertmanager, am)
	}
	return specs, nil
}

func urlOrFile(url, flag, file string) (string, error) {
	if file == "" {
		return url, nil
	}
	return readURLFile(flag, file)
}

// readURLFile reads a sink URL from a file (surrounding whitespace
// trimmed). Errors name the flag and file, never the content.
func readURLFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	u := strings.TrimSpace(string(b))
	if u == "" {
		return "", fmt.Errorf("%s %s: %w", flag, path, errEmptyURLFile)
	}
	return u, nil
}

var errEmptyURLFile = errors.New("the file is empty; it must hold one URL")
