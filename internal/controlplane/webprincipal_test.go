package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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

// A call whose credential the cache does not hold, and that has no
// deadline of its own, is told to retry (UNAVAILABLE with a reason; the
// web app answers 503) once the credential check's own deadline passes
// while the store does not answer, instead of waiting for as long as etcd
// is away: a browser's call (its session's credential), a CLI's or a
// node's (a bearer token). A call whose own deadline is sooner keeps it
// (DEADLINE_EXCEEDED).
func TestCredentialCheckAnswersRetry(t *testing.T) {
	bearer := func(ctx context.Context) context.Context {
		return metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+authz.TokenPrefix+"not-cached"))
	}
	for _, caller := range []struct {
		name string
		auth func(s *Server, ctx context.Context) (*authz.Principal, error)
	}{
		{"browser", func(s *Server, ctx context.Context) (*authz.Principal, error) {
			// authenticate's way for a web.Caller, which only the web
			// handler can put in a context.
			return s.webPrincipal(ctx, authz.Principal{Role: authz.User, Name: "ann", Cred: "a-credential-hash"})
		}},
		{"bearer token", func(s *Server, ctx context.Context) (*authz.Principal, error) {
			return s.authenticate(bearer(ctx), true)
		}},
		{"bearer token, stream's check again", func(s *Server, ctx context.Context) (*authz.Principal, error) {
			return s.authenticate(bearer(ctx), false)
		}},
	} {
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
			t.Run(caller.name+"/"+tc.name, func(t *testing.T) {
				lg := zaptest.NewLogger(t)
				s := &Server{lg: lg, authn: authn.New(hangingRecords{}, nil, func(string) bool { return false }, tc.check),
					limits: authz.NewLimiter(authz.Limits{}, authz.Limits{}, authz.DefaultPeerLimits())}
				ctx, cancel := context.WithTimeout(context.Background(), tc.own)
				defer cancel()
				_, err := caller.auth(s, ctx)
				if err == nil {
					t.Fatal("a credential was taken as live while the store did not answer")
				}
				st := status.Convert(s.refused(ctx, nil, "/cast.v1.SessionService/ListSessions", err))
				if st.Code() != tc.want {
					t.Fatalf("answered %v (%v); want %v", st.Code(), err, tc.want)
				}
				if tc.want == codes.Unavailable && !strings.Contains(st.Message(), "retry") {
					t.Fatalf("the answer %q does not say to retry", st.Message())
				}
			})
		}
	}
}
