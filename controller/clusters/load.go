package clusters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// HomeName is the home cluster's name unless a --cluster entry or a
// cluster Secret pointing at the home apiserver names it.
const HomeName = "home"

// Cluster is one cluster sluice runs rollouts in.
type Cluster struct {
	Name   string
	Labels map[string]string
	Config *rest.Config
	// Home is the cluster sluice runs against (--kubeconfig or in-cluster):
	// its Lease and state store live there.
	Home bool
	// Source says where the cluster came from, for errors and status:
	// "home", "--cluster eu-1", "secret sluice/eu-1".
	Source string
}

// Options say where Load finds the clusters.
type Options struct {
	// Home is the connection to the home cluster; its Config is used as
	// given, also when an entry names the home cluster.
	Home *rest.Config
	// Flags are the parsed --cluster values.
	Flags []Spec
	// Client is the home cluster's client, to read cluster Secrets; nil
	// reads none.
	Client kubernetes.Interface
	// Namespace is sluice's namespace, where cluster Secrets live.
	Namespace string
	// Limit sets the QPS and burst of each cluster's connection loaded
	// from a flag or a Secret (the daemon passes its own); nil leaves
	// client-go's defaults.
	Limit func(*rest.Config)
}

// Load returns every cluster sluice manages, sorted by name: home, the
// --cluster entries and the cluster Secrets. An entry whose apiserver is
// the home apiserver names and labels the home cluster; two entries on one
// apiserver, or two clusters with one name, are an error naming both.
func Load(ctx context.Context, o Options) ([]Cluster, error) {
	if o.Home == nil {
		return nil, errors.New("clusters: no home cluster connection")
	}
	entries, err := flagEntries(o.Flags)
	if err != nil {
		return nil, err
	}
	if o.Client != nil {
		fromSecrets, err := secretEntries(ctx, o.Client, o.Namespace)
		if err != nil {
			return nil, err
		}
		entries = append(entries, fromSecrets...)
	}
	if o.Limit != nil {
		for _, e := range entries {
			o.Limit(e.Config)
		}
	}
	return merge(Cluster{Name: HomeName, Config: o.Home, Home: true, Source: "home"}, entries)
}

// flagEntries loads each --cluster entry's kubeconfig file.
func flagEntries(specs []Spec) ([]Cluster, error) {
	var entries []Cluster
	for _, s := range specs {
		cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("%s: kubeconfig %s: %w", s.source(), s.Kubeconfig, err)
		}
		entries = append(entries, Cluster{Name: s.Name, Labels: s.Labels, Config: cfg, Source: s.source()})
	}
	return entries, nil
}

// merge adds entries to home: one on the home apiserver becomes home's
// name and labels, the others are clusters of their own.
func merge(home Cluster, entries []Cluster) ([]Cluster, error) {
	homeServer, err := apiserver(home.Config)
	if err != nil {
		return nil, fmt.Errorf("home cluster: %w", err)
	}
	onServer := map[string]Cluster{} // apiserver → the entry there
	var result []Cluster
	for _, e := range entries {
		server, err := apiserver(e.Config)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Source, err)
		}
		if other, ok := onServer[server]; ok {
			return nil, fmt.Errorf("%s and %s point at the same apiserver %s: one apiserver is one cluster; keep one of them", other.Source, e.Source, server)
		}
		onServer[server] = e
		if server == homeServer {
			home.Name, home.Labels, home.Source = e.Name, e.Labels, e.Source
			continue
		}
		if e.Name == HomeName {
			return nil, fmt.Errorf("%s: the name %s is reserved for the home cluster (apiserver %s), and this entry points at %s", e.Source, HomeName, homeServer, server)
		}
		result = append(result, e)
	}
	result = append(result, home)
	slices.SortFunc(result, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(result); i++ {
		if a, b := result[i-1], result[i]; a.Name == b.Name {
			return nil, fmt.Errorf("%s and %s both name a cluster %s", a.Source, b.Source, a.Name)
		}
	}
	return result, nil
}

// apiserver is the normalized URL of a connection's apiserver,
// scheme://host:port/path, so that two spellings of one address compare
// equal. It compares addresses, not identities: a name and an IP of one
// apiserver differ.
func apiserver(cfg *rest.Config) (string, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", fmt.Errorf("server %q: %w", cfg.Host, err)
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[scheme]
	}
	n := url.URL{
		Scheme: scheme,
		Host:   net.JoinHostPort(strings.ToLower(u.Hostname()), port),
		Path:   strings.TrimRight(u.Path, "/"),
	}
	return n.String(), nil
}
