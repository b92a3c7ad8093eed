package node

import castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"

// withTurnPaths fills in where agent's turns run here (HOME and the
// agent's own folder, as a turn of its default setup gets them), so
// `cast exec --dry-run` shows the paths this node would really use.
func (c Config) withTurnPaths(in *castv1.AgentInstall) *castv1.AgentInstall {
	s := c.agentSetup(in.Name)
	t := c.newTurn(in.Name, s, s.Env)
	in.Home, in.AgentDir = t.Home, t.AgentDir()
	return in
}
