package turnstate

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// stateStore records SetState calls in the shared log; err refuses them.
type stateStore struct {
	log *[]string
	err error
}

func (s stateStore) SetState(_ context.Context, id string, _ fence.Guard, t fence.TurnState) (*castv1.Session, error) {
	if s.err != nil {
		return nil, s.err
	}
	*s.log = append(*s.log, "stored "+t.State.String())
	return &castv1.Session{Id: id, State: t.State}, nil
}

// logObserver records what it heard in the shared log, then returns err.
type logObserver struct {
	name string
	log  *[]string
	err  error
}

func (o logObserver) TurnReported(_ context.Context, sess *castv1.Session, _ Report) error {
	*o.log = append(*o.log, o.name+" heard "+sess.State.String())
	return o.err
}

func TestReport(t *testing.T) {
	fenced := errors.New("fenced")
	cases := []struct {
		name     string
		storeErr error
		obsErr   error
		wantErr  error
		want     []string
	}{
		{"stored, then each observer in order", nil, nil, nil,
			[]string{"stored SESSION_STATE_PARKED", "fleet heard SESSION_STATE_PARKED", "parent heard SESSION_STATE_PARKED"}},
		{"an observer's failure neither fails the report nor stops the next", nil, errors.New("etcd down"), nil,
			[]string{"stored SESSION_STATE_PARKED", "fleet heard SESSION_STATE_PARKED", "parent heard SESSION_STATE_PARKED"}},
		{"a refused state reaches no observer", fenced, nil, fenced, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			rp := New(stateStore{log: &log, err: tc.storeErr}, zap.NewNop(),
				Named{"fleet", logObserver{"fleet", &log, tc.obsErr}},
				Named{"parent", logObserver{"parent", &log, nil}})
			sess, err := rp.Report(context.Background(), Report{SessionID: "s1", State: fence.TurnState{State: castv1.SessionState_SESSION_STATE_PARKED}})
			if !errors.Is(err, tc.wantErr) || (err == nil && sess.Id != "s1") {
				t.Fatalf("Report = %v, %v; want error %v", sess, err, tc.wantErr)
			}
			if !slices.Equal(log, tc.want) {
				t.Fatalf("happened %q, want %q", log, tc.want)
			}
		})
	}
}
