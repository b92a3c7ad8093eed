package controlplane

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/authn"
	"github.com/cast-dev/cast/internal/authz"
)

// hangingRecords is the credential records while etcd cannot be reached:
// its client waits for etcd until the call's context ends.
type hangingRecords struct{}

func (hangingRecords) LookupRecord(ctx context.Context, _ string) (authn.Record, bool, error) {
	<-ctx.Done()
	return authn.Record{}, false, ctx.Err()
}

// A browser's call, whose credential is not cached, is told to retry
// (UNAVAILABLE, which the web app answers 503) once the credential check's
// own deadline passes while the store does not answer, instead of hanging
// for as long as etcd is away: a browser's request comes with no deadline.
// A call whose own deadline is sooner keeps it (DEADLINE_EXCEEDED).
func TestWebCredentialCheckAnswersRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check time.Duration // the credential check's deadline
		own   time.Duration // the call's own deadline
		want  codes.Code
	}{
		// The call's own deadline here only stops a hang on a failure.
		{"no deadline of its own", 50 * time.Millisecond, 20 * time.Second, codes.Unavailable},
		{"its own deadline sooner", 20 * time.Second, 50 * time.Millisecond, codes.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg := zaptest.NewLogger(t)
			s := &Server{lg: lg, authn: authn.New(hangingRecords{}, nil, func(string) bool { return false }), webCheckTimeout: tc.check}
			ctx, cancel := context.WithTimeout(context.Background(), tc.own)
			defer cancel()
			_, err := s.webPrincipal(ctx, authz.Principal{Role: authz.User, Name: "ann", Cred: "a-credential-hash"})
			if err == nil {
				t.Fatal("a browser's credential was taken as live while the store did not answer")
			}
			if got := status.Code(s.refused(ctx, nil, "/cast.v1.SessionService/ListSessions", err)); got != tc.want {
				t.Fatalf("answered %v (%v); want %v", got, err, tc.want)
			}
		})
	}
}
