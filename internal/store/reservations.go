package store

import (
	"context"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The fleet's reservation ledger: fleetreservations/{agent}/{session}
// names the account a running fleet turn reserved. Each key lives on a
// lease, so a turn whose end is never reported (a node that died) frees
// its reservation by itself.

// reservationTTL bounds a reservation whose turn end never comes (seconds).
const reservationTTL = 30 * 60

func (s *Store) reservationKey(agent, sessionID string) string {
	return s.key("fleetreservations", agent, sessionID)
}

// Reserve records that sessionID's turn runs on agent's account.
func (s *Store) Reserve(ctx context.Context, agent, account, sessionID string) error {
	l, err := s.cli.Grant(ctx, reservationTTL)
	if err != nil {
		return err
	}
	_, err = s.cli.Put(ctx, s.reservationKey(agent, sessionID), account, clientv3.WithLease(l.ID))
	return err
}

// Release frees sessionID's reservation (none is fine): revoking its
// lease deletes the key and frees the lease at once.
func (s *Store) Release(ctx context.Context, agent, sessionID string) error {
	resp, err := s.cli.Get(ctx, s.reservationKey(agent, sessionID))
	if err != nil || len(resp.Kvs) == 0 {
		return err
	}
	if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		_, err = s.cli.Delete(ctx, s.reservationKey(agent, sessionID))
		return err
	}
	return nil
}

// Reservations counts agent's running fleet turns per account.
func (s *Store) Reservations(ctx context.Context, agent string) (map[string]int, error) {
	prefix := s.key("fleetreservations", agent) + "/"
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, kv := range resp.Kvs {
		if !strings.Contains(strings.TrimPrefix(string(kv.Key), prefix), "/") {
			out[string(kv.Value)]++
		}
	}
	return out, nil
}
