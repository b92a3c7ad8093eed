package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
)

// caCmd is `cast ca`: alone, it prints the control plane's CA
// certificate, checked against its pin: the file Prometheus trusts for
// cast's metrics (deploy/k8s ConfigMap cast-ca) and `cast` for gRPC
// (CAST_CACERT), got without a shell in the control plane's image. Its
// subcommands rotate the CA with an overlap (admin only, but `cast ca
// bundle`): rotate (a new CA is trusted beside the signing one), activate
// (the new one signs), retire (the old one is trusted no more); `cast ca
// status` says when each step is safe.
func (a *app) caCmd() *cobra.Command {
	var pin string
	cmd := &cobra.Command{
		Use:   "ca [--ca-pin sha256:...]",
		Short: "Print the control plane's CA certificate (PEM), checked against its pin; rotate it (rotate, activate, retire)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := a.resolve()
			if err != nil {
				return err
			}
			if pin == "" {
				pin = a.caPin(cmd.Context())
			}
			if pin == "" {
				return usagef("give --ca-pin: the pin the control plane logs (ca_pin)")
			}
			a.use(cc)
			b, err := a.fetchCA(cmd.Context(), cc.Addr, func(ctx context.Context, addr string) ([]byte, error) {
				return pki.FetchCA(ctx, addr, pin)
			})
			if err != nil {
				return err
			}
			_, err = a.out.Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&pin, "ca-pin", os.Getenv("CAST_CA_PIN"), "the CA's pin, sha256:... (controlplane logs it; env CAST_CA_PIN; default: the context's)")
	cmd.AddCommand(a.caStatusCmd(), a.caRotateCmd(), a.caActivateCmd(), a.caRetireCmd(), a.caBundleCmd())
	return cmd
}

// fetchCA asks the control plane at addrs for its CA over a connection
// of its own (before any client is dialed), within --timeout: every
// replica serves the same CA, so the first address does.
func (a *app) fetchCA(parent context.Context, addrs string, fetch func(ctx context.Context, addr string) ([]byte, error)) ([]byte, error) {
	ctx, cancel := a.ctx(parent)
	defer cancel()
	addr, _, _ := strings.Cut(addrs, ",")
	return fetch(ctx, addr)
}

func (a *app) caStatusCmd() *cobra.Command {
	return a.calling(&cobra.Command{
		Use: "status", Short: "Show the CAs of a rotation and who holds live certificates from each", Args: cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) error {
		resp, err := c.Auth.GetCAStatus(ctx, &castv1.GetCAStatusRequest{})
		return a.reply(resp, err, func() error {
			tw := newTable(a.out)
			fmt.Fprintln(tw, "STATE\tPIN\tSUBJECT\tEXPIRES\tSINCE")
			states := map[string]string{}
			for _, ca := range resp.Cas {
				states[ca.Pin] = ca.State
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ca.State, ca.Pin, ca.Subject, stamp(ca.ExpireTime), stamp(ca.StateTime))
			}
			fmt.Fprintln(tw, "\nPRINCIPAL\tISSUER\tISSUED\tEXPIRES\t")
			for _, h := range resp.Holders {
				issuer := states[h.IssuerPin]
				if issuer == "" {
					issuer = "retired"
				}
				fmt.Fprintf(tw, "%s\t%s (%s)\t%s\t%s\t\n", h.Principal, issuer, short(h.IssuerPin), stamp(h.IssueTime), stamp(h.ExpireTime))
			}
			return tw.Flush()
		})
	})
}

// stamp writes a time field in RFC 3339, UTC; "-" when unset.
func stamp(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// short abbreviates a pin for a table.
func short(pin string) string {
	if len(pin) > 19 {
		return pin[:19] + "…"
	}
	return pin
}

func (a *app) caRotateCmd() *cobra.Command {
	var certFile, keyFile string
	cmd := &cobra.Command{
		Use:   "rotate [--cert FILE --key FILE]",
		Short: "Start a CA rotation: a new CA (made, or yours) is trusted beside the signing one, which still signs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &castv1.RotateCARequest{}
			if (certFile == "") != (keyFile == "") {
				return usagef("--cert and --key go together: your new CA's certificate and its private key")
			}
			if certFile != "" {
				var err error
				if req.CertPem, err = os.ReadFile(certFile); err != nil {
					return flagFile("--cert", certFile, err)
				}
				// A CA's private key, read as the control plane reads its
				// --ca-key: refused when others can read it.
				if req.KeyPem, err = secrets.ReadPrivate(keyFile, "--key", pki.MaxCAKeyFile); err != nil {
					return flagFile("--key", keyFile, err)
				}
			}
			return a.call(cmd, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Auth.RotateCA(ctx, req)
				return a.reply(resp, err, func() error {
					fmt.Fprintf(a.out, "new CA %s (%s) is trusted; the old one still signs\n", resp.Next.Pin, resp.Next.Subject)
					fmt.Fprintf(a.errOut, "nodes learn it at their next renewal, clients at their next command; when `cast ca status` shows every node renewed, run `cast ca activate`\n")
					return nil
				})
			})
		},
	}
	cmd.Flags().StringVar(&certFile, "cert", "", "your new CA certificate (PEM); default: the control plane makes one")
	cmd.Flags().StringVar(&keyFile, "key", "", "its private key (PEM); sent over TLS and kept sealed with the secrets key")
	return cmd
}

func (a *app) caActivateCmd() *cobra.Command {
	return a.caStepCmd("activate [--force]",
		"Make the new CA sign (server certificate, renewals, new certificates); the old one's certificates still work",
		"switch even while nodes have not renewed since the rotation began (they must join again)",
		func(ctx context.Context, c *client.Client, force bool) error {
			resp, err := c.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{Force: force})
			return a.reply(resp, err, func() error {
				fmt.Fprintf(a.out, "CA %s signs now; the old CA is still trusted\n", resp.Signing.Pin)
				fmt.Fprintf(a.errOut, "new nodes join with --ca-pin %s; when `cast ca status` shows no live certificate from the old CA, run `cast ca retire`\n", resp.Signing.Pin)
				return nil
			})
		})
}

func (a *app) caRetireCmd() *cobra.Command {
	return a.caStepCmd("retire [--force]", "Stop trusting the old CA: its certificates are refused",
		"retire even while principals' latest live certificates are from the old CA (they must join again or get a new certificate)",
		func(ctx context.Context, c *client.Client, force bool) error {
			resp, err := c.Auth.RetireCA(ctx, &castv1.RetireCARequest{Force: force})
			return a.reply(resp, err, func() error {
				fmt.Fprintf(a.out, "CA %s (%s) retired: its certificates are refused\n", resp.Retired.Pin, resp.Retired.Subject)
				return nil
			})
		})
}

// caStepCmd is a later step of a CA rotation (activate, retire): no
// arguments, one call, and --force to take the step before `cast ca
// status` shows it is safe.
func (a *app) caStepCmd(use, short, forceHelp string, step func(ctx context.Context, c *client.Client, force bool) error) *cobra.Command {
	var force bool
	cmd := a.calling(&cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}, func(ctx context.Context, c *client.Client, _ []string) error {
		return step(ctx, c, force)
	})
	cmd.Flags().BoolVar(&force, "force", false, forceHelp)
	return cmd
}

func (a *app) caBundleCmd() *cobra.Command {
	return a.calling(&cobra.Command{
		Use: "bundle", Short: "Print the CAs to trust in the control plane (PEM), for a client that missed a rotation", Args: cobra.NoArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) error {
		resp, err := c.Auth.GetCABundle(ctx, &castv1.GetCABundleRequest{})
		if err != nil {
			return err
		}
		_, err = a.out.Write(resp.Bundle)
		return err
	})
}
