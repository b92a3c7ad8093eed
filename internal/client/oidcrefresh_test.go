package client_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Two cast processes holding the same logged-in context, its ID token
// near its exp, both call the control plane: the first refreshes, and the
// second uses the pair the first stored instead of spending the refresh
// token the issuer (rotating strictly, as the fake does) has retired.
// Before, the second refreshed with the retired token, was refused, and
// the user had to `cast login` again.
func TestOIDCRefreshOfTwoProcessesSpendsTheRefreshTokenOnce(t *testing.T) {
	iss := testharness.StartOIDCIssuer(t)
	iss.SetLoginTTL(30 * time.Second) // the login's token: inside the refresh margin
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast"
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := client.Login(ctx, iss.URL, "cast", client.GrantDeviceCode, client.LoginPrompts{Device: func(d *oauth2.DeviceAuthResponse) {
		resp, err := http.Get(d.VerificationURIComplete + "&" + url.Values{"email": {"alice@example.com"}}.Encode())
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return dir
		}
		return ""
	}
	err = client.SetContext(filepath.Join(dir, "cast", "config.yaml"), "work", client.Context{Addr: srv.Addr(), Token: res.IDToken,
		OIDC: &client.OIDCLogin{Issuer: iss.URL, ClientID: "cast", RefreshToken: res.RefreshToken}})
	if err != nil {
		t.Fatal(err)
	}
	iss.SetLoginTTL(time.Hour) // the refreshed token's
	var procs []*client.Client
	for range 2 { // each reads the context as a process starting would
		c, err := client.Resolve(getenv, "", "")
		if err != nil {
			t.Fatal(err)
		}
		cli, err := c.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		procs = append(procs, cli)
	}
	for i, cli := range procs {
		who, err := cli.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{})
		if err != nil || who.Principal != "user:alice@example.com" {
			t.Fatalf("process %d: %v %v", i+1, who, err)
		}
	}
	if n := iss.Refreshes(); n != 1 {
		t.Fatalf("the issuer answered %d refreshes, want 1", n)
	}
}
