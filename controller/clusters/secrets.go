package clusters

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// SecretLabel marks a Secret in sluice's namespace as a cluster (as Argo
// CD's argocd.argoproj.io/secret-type: cluster).
const SecretLabel = "sluice.io/cluster"

// The keys of a cluster Secret's data.
const (
	SecretKubeconfig = "kubeconfig" // required: a kubeconfig file (its current context)
	SecretName       = "name"       // optional: the cluster's name; default the Secret's name
	SecretLabels     = "labels"     // optional: "region=eu,tier=prod"
)

// secretEntries reads the Secrets labelled SecretLabel=true in namespace.
func secretEntries(ctx context.Context, client kubernetes.Interface, namespace string) ([]Cluster, error) {
	if namespace == "" {
		return nil, fmt.Errorf("cluster secrets: no namespace to read them from")
	}
	list, err := client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: SecretLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list cluster secrets in %s (label %s=true): %w", namespace, SecretLabel, err)
	}
	secrets := list.Items
	slices.SortFunc(secrets, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
	var entries []Cluster
	for _, s := range secrets {
		source := "secret " + s.Namespace + "/" + s.Name
		e, err := fromSecret(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		e.Source = source
		entries = append(entries, e)
	}
	return entries, nil
}

// fromSecret reads one cluster Secret's data.
func fromSecret(s corev1.Secret) (Cluster, error) {
	name := s.Name
	if n, ok := s.Data[SecretName]; ok {
		name = string(n)
	}
	if err := checkName(name); err != nil {
		return Cluster{}, fmt.Errorf("data.%s (default: the Secret's name): %w", SecretName, err)
	}
	c := Cluster{Name: name}
	if l := strings.TrimSpace(string(s.Data[SecretLabels])); l != "" {
		labels, err := parseLabels(l)
		if err != nil {
			return Cluster{}, fmt.Errorf("data.%s: %w", SecretLabels, err)
		}
		c.Labels = labels
	}
	kubeconfig, ok := s.Data[SecretKubeconfig]
	if !ok || len(kubeconfig) == 0 {
		return Cluster{}, fmt.Errorf("data.%s: missing (a kubeconfig file's bytes)", SecretKubeconfig)
	}
	cfg, err := secretConfig(kubeconfig)
	if err != nil {
		return Cluster{}, fmt.Errorf("data.%s: %w", SecretKubeconfig, err)
	}
	c.Config = cfg
	return c, nil
}

// secretConfig builds a connection from a Secret's kubeconfig. It refuses
// file references and exec plugins: whoever may write a Secret in sluice's
// namespace could otherwise make sluice run a command, or send a file of
// its own (its service account token) to a server of their choice.
func secretConfig(kubeconfig []byte) (*rest.Config, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := refuseLocalReferences(raw); err != nil {
		return nil, err
	}
	return clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// refuseLocalReferences refuses what would reach outside the Secret:
// files and commands.
func refuseLocalReferences(c *clientcmdapi.Config) error {
	for name, cl := range c.Clusters {
		if cl.CertificateAuthority != "" {
			return fmt.Errorf("cluster %s: certificate-authority is a file path; give certificate-authority-data", name)
		}
	}
	for name, u := range c.AuthInfos {
		switch {
		case u.ClientCertificate != "" || u.ClientKey != "":
			return fmt.Errorf("user %s: client-certificate and client-key are file paths; give client-certificate-data and client-key-data", name)
		case u.TokenFile != "":
			return fmt.Errorf("user %s: tokenFile is a file path; give token", name)
		case u.Exec != nil:
			return fmt.Errorf("user %s: exec plugins are not run from cluster Secrets; give a token or a client certificate", name)
		case u.AuthProvider != nil:
			return fmt.Errorf("user %s: auth-provider plugins are not run from cluster Secrets; give a token or a client certificate", name)
		}
	}
	return nil
}
