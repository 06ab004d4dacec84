package httpapi

import "github.com/sluice-dev/sluice/controller/rollout"

// RolloutStatus is the RolloutStatus of DESIGN §5, defined by the state
// machine (rollout.Status, from State.Status); its JSON field names are the
// contract, checked here against the DESIGN example in
// testdata/status.golden.
type RolloutStatus = rollout.Status

// Verbs are the operator commands as written in URLs
// (POST /api/v1/rollouts/{namespace}/{name}/{verb}) and on the command line.
var Verbs = []string{"promote", "abort", "retry", "approve", "pause", "resume"}

// commandOf maps a URL verb to the state machine's command; full is
// ?full=true, valid only on promote.
func commandOf(verb string, full bool) (rollout.Command, bool) {
	kinds := map[string]rollout.CommandKind{
		"promote": rollout.CmdPromote,
		"abort":   rollout.CmdAbort,
		"retry":   rollout.CmdRetry,
		"approve": rollout.CmdApprove,
		"pause":   rollout.CmdPause,
		"resume":  rollout.CmdResume,
	}
	k, ok := kinds[verb]
	if full && k == rollout.CmdPromote {
		k = rollout.CmdPromoteFull
	}
	return rollout.Command{Kind: k}, ok
}
