package controlplane_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// callEmpty calls method of the stub (a client.Client field) with an
// empty request (a stream: one empty message, then its first answer) and
// returns the call's error.
func callEmpty(ctx context.Context, stub reflect.Value, method string) error {
	m := stub.MethodByName(method)
	ft := m.Type()
	args := []reflect.Value{reflect.ValueOf(ctx)}
	var req proto.Message
	if ft.NumIn() > 1 && ft.In(1).Kind() == reflect.Pointer {
		req = reflect.New(ft.In(1).Elem()).Interface().(proto.Message)
		args = append(args, reflect.ValueOf(req))
	}
	out := m.Call(args)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return err
	}
	if len(out) == 1 {
		return nil
	}
	res := out[0]
	if _, unary := res.Interface().(proto.Message); unary {
		return nil
	}
	// A stream: a client stream sends its one empty message first.
	if req == nil {
		send := res.MethodByName("Send")
		msg := reflect.New(send.Type().In(0).Elem())
		if err, _ := send.Call([]reflect.Value{msg})[0].Interface().(error); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if err, _ := res.MethodByName("CloseSend").Call(nil)[0].Interface().(error); err != nil {
			return err
		}
	}
	recv := res.MethodByName("Recv")
	if !recv.IsValid() {
		recv = res.MethodByName("CloseAndRecv")
	}
	err, _ := recv.Call(nil)[1].Interface().(error)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// codeNamed are the reasons spelled as a gRPC code.
var codeNamed = map[string]codes.Code{
	"INVALID_ARGUMENT": codes.InvalidArgument, "NOT_FOUND": codes.NotFound, "INTERNAL": codes.Internal, "UNAUTHENTICATED": codes.Unauthenticated, "PERMISSION_DENIED": codes.PermissionDenied,
}

// TestEveryRefusalHasAReason walks every method of every cast.v1 stub
// over TLS and calls it with an empty request as nobody, as a user, as
// a node and as an admin: a refusal always carries an ErrorInfo reason,
// and a reason spelled as a code only with that code; nobody is
// UNAUTHENTICATED on every call but the public ones, and a user or a node
// is PERMISSION_DENIED (never a handler's answer) where its role may not call.
// It walks a plaintext control plane (--insecure, as --dev) too, where
// certificates are refused.
func TestEveryRefusalHasAReason(t *testing.T) {
	t.Parallel()
	for name, tls := range map[string]bool{"tls": true, "plaintext": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			walkRefusals(t, tls)
		})
	}
}

func walkRefusals(t *testing.T, tls bool) {
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled, c.Insecure = tls, !tls })
	dial := func(token string) *client.Client {
		c, err := client.Context{Addr: srv.Addr(), CAPin: srv.CAPin(), Token: token, Insecure: !tls}.Dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	admin := dial(testharness.AdminToken())
	ctx := ctxT(t)
	tok, err := admin.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: "alice", Role: castv1.Role_ROLE_USER})
	if err != nil {
		t.Fatal(err)
	}
	join, err := admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	nobody := dial("")
	joined, err := nobody.Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "n1", JoinToken: join.Token})
	if err != nil {
		t.Fatal(err)
	}
	if !tls {
		// Checked before the join token is spent or the CSR read.
		_, err := nobody.Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "n2", JoinToken: join.Token, Csr: []byte("csr")})
		wantDenied(t, "a join with a CSR on plaintext", err, codes.FailedPrecondition, errs.ReasonTLSRequired)
	}
	callers := map[string]*client.Client{"nobody": nobody, "user": dial(tok.Token), "node": dial(joined.Credential), "admin": admin}
	policy := srv.Policy()
	calls := 0
	for who, c := range callers {
		cv := reflect.ValueOf(c).Elem()
		for i := range cv.NumField() {
			f := cv.Field(i)
			if !cv.Type().Field(i).IsExported() || f.Kind() != reflect.Interface {
				continue
			}
			svc := cv.Type().Field(i).Type.Name() // SessionServiceClient
			svc = "/cast.v1." + svc[:len(svc)-len("Client")] + "/"
			for j := range f.NumMethod() {
				name := f.Type().Method(j).Name
				rule, err := policy.Rule(svc + name)
				if err != nil {
					t.Errorf("%s%s: %v", svc, name, err)
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				err = callEmpty(cctx, f, name)
				cancel()
				calls++
				if err == nil {
					if who == "nobody" && !rule.Public {
						t.Errorf("%s %s%s: answered, want UNAUTHENTICATED", who, svc, name)
					}
					continue
				}
				code, reason := status.Code(err), client.ReasonOf(err)
				if reason == "" {
					t.Errorf("%s %s%s: %v without a reason", who, svc, name, err)
				}
				// A reason named as a code is that code's: scripts take
				// INVALID_ARGUMENT for "fix the request".
				if named, ok := codeNamed[reason]; ok && named != code {
					t.Errorf("%s %s%s: %v with reason %s", who, svc, name, code, reason)
				}
				switch {
				case who == "nobody" && !rule.Public && code != codes.Unauthenticated:
					t.Errorf("%s %s%s: %v, want UNAUTHENTICATED", who, svc, name, err)
				case (who == "user" && !rule.Public && !slices.Contains(rule.Roles, authz.User) ||
					who == "node" && !rule.Public && !slices.Contains(rule.Roles, authz.Node)) && code != codes.PermissionDenied:
					t.Errorf("%s %s%s: %v, want PERMISSION_DENIED", who, svc, name, err)
				}
			}
		}
	}
	if calls < 80 {
		t.Fatalf("walked only %d calls", calls)
	}
}
