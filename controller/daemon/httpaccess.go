package daemon

import (
	"fmt"
	"net"

	"github.com/sluice-dev/sluice/controller/httpapi"
)

// APIAccess fills in base who may use the HTTP API: the write and read
// tokens (read from their files), the host names served and the trusted
// origins. The leader's daemon and a follower (controller/replica) serve
// the API with the same rules.
func (o Options) APIAccess(base httpapi.Options) (httpapi.Options, error) {
	var err error
	if o.APITokenFile != "" {
		if base.Token, err = httpapi.ReadToken(o.APITokenFile); err != nil {
			return base, fmt.Errorf("api token: %w", err)
		}
	}
	if o.APIReadTokenFile != "" {
		if o.APITokenFile == "" {
			return base, fmt.Errorf("--api-read-token-file needs --api-token-file: writes would need no token while reads do")
		}
		if base.ReadToken, err = httpapi.ReadToken(o.APIReadTokenFile); err != nil {
			return base, fmt.Errorf("api read token: %w", err)
		}
	}
	base.AllowedHosts = append(append([]string(nil), o.APIAllowedHosts...), listenName(o.HTTPAddr)...)
	base.TrustedOrigins = o.APITrustedOrigins
	base.Limits = o.HTTPLimits
	return base, nil
}

// listenName is the host of a --http-addr given as a name
// ("sluice.internal:8080"): the API answers to the name it listens on.
// IP addresses need no entry (they are always served) and ":8080" names
// nothing.
func listenName(addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return nil
	}
	return []string{host}
}
