package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Canary verdicts: agentchecks/{agent}/{version}/{capability} holds the
// latest castv1.AgentCheck for that triple. The caller validates the three
// parts (no '/'), so a key names exactly one verdict.

// MaxAgentChecks bounds one PutAgentChecks (one etcd transaction).
const MaxAgentChecks = 64

func (s *Store) agentCheckKey(c *castv1.AgentCheck) string {
	return s.key("agentchecks", c.Agent, c.Version, c.Capability)
}

// PutAgentChecks stores checks in one transaction: a run's verdicts land
// together or not at all.
func (s *Store) PutAgentChecks(ctx context.Context, checks []*castv1.AgentCheck) error {
	defer s.observe("put_agent_checks", time.Now())
	if len(checks) > MaxAgentChecks {
		return errs.Invalid("%d checks in one call; send at most %d", len(checks), MaxAgentChecks)
	}
	ops := make([]clientv3.Op, 0, len(checks))
	for _, c := range checks {
		b, err := proto.Marshal(c)
		if err != nil {
			return errs.Internal(err, "encode agent check")
		}
		ops = append(ops, clientv3.OpPut(s.agentCheckKey(c), string(b)))
	}
	_, err := s.cli.Txn(ctx).Then(ops...).Commit()
	return err
}

// ListAgentChecks returns the verdicts of one agent (every agent for ""),
// in key order: agent, version, capability.
func (s *Store) ListAgentChecks(ctx context.Context, agent string) ([]*castv1.AgentCheck, error) {
	prefix := s.agentPrefix("agentchecks", agent)
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	return decodeProtos[castv1.AgentCheck](resp.Kvs, "agent check")
}
