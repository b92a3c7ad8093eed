package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/netaddr"
)

// loginTimeout bounds a login: the person has this long to approve it.
const loginTimeout = 10 * time.Minute

func (a *app) loginCmd() *cobra.Command {
	var l oidcLogin
	cmd := &cobra.Command{
		Use:   "login [--issuer URL --client-id ID] [--grant-type auto|authcode|device-code]",
		Short: "Log in to the context's OIDC issuer and keep the ID token and refresh token in the context",
		Long: "Log in with OpenID Connect for the context (--context, else CAST_CONTEXT, else the current one).\n" +
			"With --grant-type device-code cast asks the issuer for a device code, and you open the URL it prints on\n" +
			"any device and enter the code. With authcode cast prints the issuer's URL to open in a browser on this\n" +
			"machine; the issuer sends the browser back to a one-shot listener on 127.0.0.1 (authorization code\n" +
			"with PKCE). auto, the default, is device-code when the issuer offers it, else authcode.\n" +
			"The ID token and refresh token go in the context (the 0600 contexts file). Commands then send the\n" +
			"ID token, and trade the refresh token for a new one when it expires. --issuer and --client-id (the\n" +
			"control plane's --oidc-issuer and --oidc-client-id) are needed the first time; later logins reuse them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := l.resolve(a.context); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), loginTimeout)
			defer cancel()
			res, err := client.Login(ctx, l.issuer, l.clientID, l.grant, a.loginPrompts())
			if err != nil {
				return err
			}
			if err := l.store(res); err != nil {
				return err
			}
			return a.printLogin(l.name, res)
		},
	}
	cmd.Flags().StringVar(&l.issuer, "issuer", "", "the OIDC issuer URL (default: the context's from its last login)")
	cmd.Flags().StringVar(&l.clientID, "client-id", "", "the OIDC client id, the audience the control plane expects (default: the context's)")
	cmd.Flags().StringVar(&l.grant, "grant-type", client.GrantAuto, "how to log in: "+strings.Join(client.Grants, "|")+" (auto: device-code when the issuer offers it, else authcode)")
	_ = cmd.RegisterFlagCompletionFunc("grant-type", cobra.FixedCompletions(client.Grants, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// oidcLogin is a login: its flags, and the contexts file and context it is
// for.
type oidcLogin struct {
	issuer, clientID, grant string
	path, name              string
}

// resolve finds the context (flag, else CAST_CONTEXT, else the current
// one), takes the issuer and client id of its last login where the flags
// give none, and refuses what cannot log in before the issuer is asked.
func (l *oidcLogin) resolve(flag string) error {
	if !slices.Contains(client.Grants, l.grant) {
		return usagef("--grant-type %q: use one of %s", l.grant, strings.Join(client.Grants, ", "))
	}
	name, cur, err := client.NeedContext(os.Getenv, flag)
	if err != nil {
		return err
	}
	l.path, l.name = configPath(), name
	if cur.OIDC != nil {
		l.issuer, l.clientID = cmp.Or(l.issuer, cur.OIDC.Issuer), cmp.Or(l.clientID, cur.OIDC.ClientID)
	}
	if l.issuer == "" || l.clientID == "" {
		return usagef("--issuer URL and --client-id ID are needed (the control plane's --oidc-issuer and --oidc-client-id)")
	}
	if err := netaddr.CheckIssuerURL(l.issuer); err != nil {
		return usageError{err}
	}
	return nil
}

// store puts the new tokens in the context, in place of any token or token
// command it had, with the issuer and client id the next login reuses.
func (l *oidcLogin) store(res *client.LoginResult) error {
	return client.UpdateContext(l.path, l.name, func(c *client.Context) {
		c.Token, c.TokenCommand = res.IDToken, nil
		c.OIDC = &client.OIDCLogin{Issuer: l.issuer, ClientID: l.clientID, RefreshToken: res.RefreshToken}
	})
}

// loginPrompts tell the person what to open. They go to stderr: stdout is
// left for the result scripts read.
func (a *app) loginPrompts() client.LoginPrompts {
	return client.LoginPrompts{
		Device: func(da *oauth2.DeviceAuthResponse) {
			fmt.Fprintf(a.errOut, "To log in, open %s and enter the code %s\n", a.forScreen(da.VerificationURI), a.forScreen(da.UserCode))
			if da.VerificationURIComplete != "" {
				fmt.Fprintf(a.errOut, "(or open %s)\n", a.forScreen(da.VerificationURIComplete))
			}
		},
		Browser: func(authURL string) {
			fmt.Fprintf(a.errOut, "To log in, open this URL in a browser on this machine:\n%s\n", a.forScreen(authURL))
		},
	}
}

// printLogin tells who is logged in to context name, until when, and
// whether the login renews itself.
func (a *app) printLogin(name string, res *client.LoginResult) error {
	if a.json {
		return a.printJSON(map[string]any{"context": name, "user": res.Subject, "expires": res.Expiry.UTC().Format(time.RFC3339),
			"refresh": res.RefreshToken != ""})
	}
	renew := "it renews itself until the issuer ends the login"
	if res.RefreshToken == "" {
		renew = "the issuer gave no refresh token: `cast login` again then"
	}
	fmt.Fprintf(a.out, "logged in to context %q as %s; the token lasts until %s, %s\n", name, a.forScreen(res.Subject),
		res.Expiry.Local().Format(time.RFC1123), renew)
	return nil
}
