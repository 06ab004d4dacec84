package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/httpapi/client"
)

// clientOptions are the flags shared by every command that talks to the
// daemon.
type clientOptions struct {
	server    string
	tokenFile string
	output    string
}

func (o *clientOptions) addFlags(cmd *cobra.Command, withOutput bool) {
	cmd.Flags().StringVar(&o.server, "server", "", "daemon URL (env "+client.EnvServer+", default "+client.DefaultServer+")")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "file holding the API bearer token: the write token for commands, the read or write token for reads when the server has --api-read-token-file")
	if withOutput {
		cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	}
}

func (o *clientOptions) client() (*client.Client, error) {
	server := o.server
	if server == "" {
		server = os.Getenv(client.EnvServer)
	}
	var token string
	if o.tokenFile != "" {
		t, err := httpapi.ReadToken(o.tokenFile)
		if err != nil {
			return nil, err
		}
		token = t
	}
	return client.New(client.Options{Server: server, Token: token})
}

func (o *clientOptions) checkOutput() error {
	switch o.output {
	case "", "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q (use table, json or yaml)", o.output)
}

// printStructured writes v as indented JSON or as YAML (same field names).
func printStructured(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// apiFailure turns an answer the daemon gave (not found, refused,
// unauthorized) into a message and exit status 1; transport errors pass
// through (exit 2).
func apiFailure(cmd *cobra.Command, err error) error {
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Fprintln(cmd.ErrOrStderr(), "sluice:", err)
		return exitError{code: 1}
	}
	return err
}
