package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/faults"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// The checker finds what is wrong: an acknowledgement the store does not
// hold is lost, one read back with other bytes or at another seq is
// corrupt, a second owner is reported; the rest is found.
func TestCheckerFindsLossAndCorruption(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", noAgents)
	waitConnected(t, c, "n1", 30*time.Second)
	sess := newSessions(t, c, "n1", "claude", "", 1)[0]
	var acks []faults.Ack
	for _, text := range []string{"one", "two", "three"} {
		a := faults.Ack{Session: sess, ClientID: ids.NewClientID(), Body: []byte(text)}
		a.Seq = sendRetrying(t, c, a)
		acks = append(acks, a)
	}
	wrongBody, wrongSeq := acks[1], acks[2]
	wrongBody.Body = []byte("TWO")
	wrongSeq.Seq++
	lost := faults.Ack{Session: sess, ClientID: ids.NewClientID(), Seq: 9, Body: []byte("never sent")}
	claims := func(context.Context) (map[string][]string, error) {
		return map[string][]string{sess: {"n1", "n2"}}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := faults.Checker{Sessions: c.Sessions, Claims: claims}.Check(ctx, "self-test", []faults.Ack{acks[0], wrongBody, wrongSeq, lost})
	if err != nil {
		t.Fatal(err)
	}
	if r.Acknowledged != 4 || r.Found != 1 || r.Corrupt != 2 || r.Lost != 1 || r.Duplicated != 0 || r.Unreadable != 0 || len(r.Problems) != 4 || r.OK() {
		t.Fatalf("report:\n%s", r)
	}
	r, err = faults.Checker{Sessions: c.Sessions, PageSize: 1}.Check(ctx, "self-test", acks)
	if err != nil || !r.OK() || r.Found != 3 {
		t.Fatalf("report: %v\n%s", err, r)
	}
}
