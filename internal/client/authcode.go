package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Grant types `cast login --grant-type` takes (kubelogin's names).
const (
	GrantAuto       = "auto"        // device code when the issuer offers it, else authcode
	GrantAuthCode   = "authcode"    // authorization code + PKCE, loopback redirect
	GrantDeviceCode = "device-code" // device authorization grant
)

// Grants are the values of --grant-type, the default first.
var Grants = []string{GrantAuto, GrantAuthCode, GrantDeviceCode}

// callbackPath is where the issuer sends the browser back to.
const callbackPath = "/callback"

// LoginPrompts show the person what to do: Device for the device grant
// (the URL and the code), Browser for the authorization code grant (the
// URL to open on this machine).
type LoginPrompts struct {
	Device  func(*oauth2.DeviceAuthResponse)
	Browser func(authURL string)
}

// Login logs in at issuer as clientID with grant (one of Grants); it
// returns once the person approved (or ctx ends).
func Login(ctx context.Context, issuer, clientID, grant string, prompts LoginPrompts) (*LoginResult, error) {
	if !slices.Contains(Grants, grant) {
		return nil, fmt.Errorf("grant type %q is not one of %v", grant, Grants)
	}
	p, ctx, err := oidcProvider(ctx, issuer)
	if err != nil {
		return nil, err
	}
	conf := &oauth2.Config{ClientID: clientID, Endpoint: p.Endpoint(), Scopes: LoginScopes}
	if grant == GrantAuto {
		grant = GrantAuthCode
		if conf.Endpoint.DeviceAuthURL != "" {
			grant = GrantDeviceCode
		}
	}
	if grant == GrantDeviceCode {
		return deviceLogin(ctx, p, conf, issuer, prompts.Device)
	}
	return authCodeLogin(ctx, p, conf, issuer, prompts.Browser)
}

// authCodeLogin is the authorization code grant with PKCE (S256) and a
// loopback redirect on a port chosen now: a random state ties the answer
// to this login, and the verifier proves to the token endpoint that the
// code's redeemer is the process that asked for it.
func authCodeLogin(ctx context.Context, p *oidc.Provider, conf *oauth2.Config, issuer string, prompt func(string)) (*LoginResult, error) {
	if conf.Endpoint.AuthURL == "" {
		return nil, fmt.Errorf("the issuer %s offers no authorization endpoint; use --grant-type device-code", issuer)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("a loopback listener for the issuer's redirect: %w", err)
	}
	conf.RedirectURL = "http://" + lis.Addr().String() + callbackPath
	state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	codes := make(chan callbackResult, 1)
	defer serveCallback(lis, callbackHandler(state, codes))()

	prompt(conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
	var res callbackResult
	select {
	case res = <-codes:
	case <-ctx.Done():
		return nil, fmt.Errorf("login at %s: no answer from the browser: %w", issuer, ctx.Err())
	}
	if res.err != nil {
		return nil, fmt.Errorf("login at %s: %w", issuer, res.err)
	}
	tok, err := conf.Exchange(ctx, res.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("login at %s: redeeming the code: %w", issuer, err)
	}
	return idTokenOf(ctx, p, conf.ClientID, tok)
}

// callbackDrain bounds how long the end of a login waits for the
// browser's page to be written.
const callbackDrain = 5 * time.Second

// serveCallback serves h on lis until the returned stop is called. stop
// lets a response in flight finish first: the handler hands the code over
// before it writes the browser's page, and closing at once when the login
// had its token cut that page off (the browser showed a connection error,
// not "logged in").
func serveCallback(lis net.Listener, h http.Handler) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), callbackDrain)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}
}

type callbackResult struct {
	code string
	err  error
}

// callbackHandler takes the first redirect that carries this login's
// state (a code or the issuer's error) and tells the browser to go back to
// the terminal; anything else is refused and waited past.
func callbackHandler(state string, codes chan<- callbackResult) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+callbackPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("state") != state {
			http.Error(w, "this is not the login cast started (state differs); start it again with `cast login`", http.StatusBadRequest)
			return
		}
		res := callbackResult{code: q.Get("code")}
		switch {
		case q.Get("error") != "":
			res = callbackResult{err: fmt.Errorf("the issuer refused: %s %s", q.Get("error"), q.Get("error_description"))}
		case res.code == "":
			res = callbackResult{err: errors.New("the issuer's redirect carried no code")}
		}
		select {
		case codes <- res:
			if res.err != nil {
				http.Error(w, res.err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintln(w, "cast: logged in; you can close this tab and go back to the terminal.")
		default:
			http.Error(w, "this login was already answered", http.StatusConflict)
		}
	})
	return mux
}
