package cli

import (
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/pki"
)

// caCmd prints the control plane's CA certificate, checked against its
// pin: the file Prometheus trusts for cast's metrics (deploy/k8s
// ConfigMap cast-ca) and `cast` for gRPC (CAST_CACERT), got without a
// shell in the control plane's image.
func (a *app) caCmd() *cobra.Command {
	var pin string
	cmd := &cobra.Command{
		Use:   "ca [--ca-pin sha256:...]",
		Short: "Print the control plane's CA certificate (PEM), checked against its pin (for CAST_CACERT and Prometheus' ca_file)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := client.Resolve(os.Getenv, a.context, a.addr)
			if err != nil {
				return err
			}
			if pin == "" {
				pin = a.caPin()
			}
			if pin == "" {
				return usagef("give --ca-pin: the pin the control plane logs (ca_pin)")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
			defer cancel()
			addr, _, _ := strings.Cut(cc.Addr, ",") // every replica serves the same CA
			b, err := pki.FetchCA(ctx, addr, pin)
			if err != nil {
				return err
			}
			_, err = a.out.Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&pin, "ca-pin", os.Getenv("CAST_CA_PIN"), "the CA's pin, sha256:... (controlplane logs it; env CAST_CA_PIN; default: the context's)")
	return cmd
}
