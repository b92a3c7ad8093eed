package cli

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/secrets"
)

// `cast config` edits the contexts file (client.ConfigPath, 0600, written
// atomically) as kubectl's config commands edit a kubeconfig. Nothing it
// prints carries a token: a context's credential shows only as its kind.

func (a *app) configCmd() *cobra.Command {
	grp := &cobra.Command{Use: "config", Short: "Show and change the contexts of ~/.config/cast/config.yaml (control planes and their credentials)"}
	grp.AddCommand(a.getContextsCmd(), a.useContextCmd(), a.setContextCmd(), a.currentContextCmd())
	return grp
}

func configPath() string { return client.ConfigPath(os.Getenv) }

// contextView is one context as get-contexts prints it: never its token.
type contextView struct {
	Name    string `json:"name"`
	Addr    string `json:"addr"`
	Node    string `json:"node,omitempty"`
	Current bool   `json:"current"`
	Auth    string `json:"auth,omitempty"` // token, token-command, oidc, cert; "" none
	CA      string `json:"ca,omitempty"`
	CAPin   string `json:"ca_pin,omitempty"`
}

// authKind names the credential c holds, without the credential.
func authKind(c *client.Context) string {
	switch {
	case c.OIDC != nil:
		return "oidc"
	case len(c.TokenCommand) > 0:
		return "token-command"
	case c.Token != "":
		return "token"
	case c.Cert != "":
		return "cert"
	}
	return ""
}

func (a *app) getContextsCmd() *cobra.Command {
	var out listFlags
	cmd := &cobra.Command{
		Use:   "get-contexts [NAME...]",
		Short: "List the contexts (* marks the current one); tokens are never shown",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := client.LoadConfig(configPath())
			if err != nil {
				return err
			}
			var views []contextView
			for _, name := range slices.Sorted(maps.Keys(cfg.Contexts)) {
				if len(args) > 0 && !slices.Contains(args, name) {
					continue
				}
				c := cfg.Contexts[name]
				views = append(views, contextView{Name: name, Addr: c.Addr, Node: c.Node, Current: name == cfg.CurrentContext,
					Auth: authKind(c), CA: c.CA, CAPin: c.CAPin})
			}
			for _, name := range args {
				if cfg.Contexts[name] == nil {
					return &client.NoContextError{Name: name, Path: configPath(), Have: cfg.Names()}
				}
			}
			if views == nil {
				views = []contextView{}
			}
			return printObjects(a, out, listing[contextView]{
				key: "contexts", items: views, name: func(v contextView) string { return v.Name },
				empty: "no contexts; add one with `cast config set-context NAME --addr HOST:PORT`",
				columns: []column[contextView]{
					{header: "NAME", cell: func(v contextView) string { return v.Name }},
					{header: "ADDR", cell: func(v contextView) string { return v.Addr }},
					{header: "NODE", cell: func(v contextView) string { return v.Node }},
					{header: "CURRENT", cell: func(v contextView) string {
						if v.Current {
							return "*"
						}
						return ""
					}},
					{header: "AUTH", wide: true, cell: func(v contextView) string { return v.Auth }},
					{header: "CA", wide: true, cell: func(v contextView) string { return v.CA + v.CAPin }},
				},
			}, views)
		},
	}
	out.bind(cmd, a)
	return cmd
}

func (a *app) useContextCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make NAME the current context: commands without --context or CAST_CONTEXT use it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := client.UseContext(configPath(), args[0]); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"current_context": args[0]})
			}
			fmt.Fprintf(a.out, "switched to context %q\n", args[0])
			return nil
		},
	}
}

func (a *app) currentContextCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := client.LoadConfig(configPath())
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return fmt.Errorf("no current context in %s; `cast config use-context NAME` sets one", configPath())
			}
			if a.json {
				return a.printJSON(map[string]any{"current_context": cfg.CurrentContext})
			}
			fmt.Fprintln(a.out, cfg.CurrentContext)
			return nil
		},
	}
}

func (a *app) setContextCmd() *cobra.Command {
	var e contextEdit
	cmd := &cobra.Command{
		Use:   "set-context NAME [--addr HOST:PORT] [--ca FILE | --ca-pin PIN] [--token-file FILE | --token-command CMD] [--node NODE]",
		Short: "Make or change a context; only the fields given change, and the current context stays as it is",
		Long: "Make or change a context of the contexts file (0600). The token is read from --token-file (a 0600\n" +
			"file) and stored in the context, never taken on the command line; --token-command is a program and\n" +
			"its arguments, split at spaces and run without a shell, that prints the token (an OIDC helper).\n" +
			"An empty value (--node=) removes a field.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !ids.ValidName(name) {
				return usagef("context name %q is not valid (letters, digits, '-', '_', '.')", name)
			}
			e.name, e.changed = name, cmd.Flags().Changed
			if err := e.check(); err != nil {
				return err
			}
			created, err := client.EditContext(configPath(), name, e.apply)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"name": name, "created": created})
			}
			verb := "changed"
			if created {
				verb = "made"
			}
			fmt.Fprintf(a.out, "%s context %q\n", verb, name)
			fmt.Fprintf(a.errOut, "`cast config use-context %s` makes it current\n", name)
			return nil
		},
	}
	// --addr is also the root's flag (the control plane to call); here it
	// is the address stored in the context, which shadows it.
	cmd.Flags().StringVar(&e.addr, "addr", "", "the control plane's address, host:port (several replicas: comma-separated)")
	cmd.Flags().StringVar(&e.ca, "ca", "", "CA certificate file to trust (TLS)")
	cmd.Flags().StringVar(&e.caPin, "ca-pin", "", "trust the CA by its public key (sha256:...) instead of a file")
	cmd.Flags().StringVar(&e.tokenFile, "token-file", "", "a 0600 file holding the token to store in the context")
	cmd.Flags().StringVar(&e.tokenCommand, "token-command", "", "program (and arguments) printing the token, run without a shell")
	cmd.Flags().StringVar(&e.node, "node", "", "the node on this machine: new sessions without --node go there")
	return cmd
}

// contextEdit is what set-context changes: the flags given (changed), and
// the token read from --token-file.
type contextEdit struct {
	name                                           string // the context's
	addr, ca, caPin, tokenFile, tokenCommand, node string
	token                                          string
	changed                                        func(flag string) bool
}

// check refuses flags that contradict each other or name nothing valid,
// and reads the token file and the CA's absolute path, before any write.
func (e *contextEdit) check() error {
	if e.changed("token-file") && e.changed("token-command") {
		return usagef("give the token one way: --token-file or --token-command")
	}
	if e.changed("ca") && e.changed("ca-pin") && e.ca != "" && e.caPin != "" {
		return usagef("trust the CA one way: --ca FILE or --ca-pin PIN")
	}
	for _, one := range client.Addrs(e.addr) {
		if _, _, err := net.SplitHostPort(one); err != nil {
			return usagef("--addr %q is not HOST:PORT", one)
		}
	}
	if e.tokenFile != "" {
		var err error
		if e.token, err = secrets.ReadToken(e.tokenFile); err != nil {
			return flagFile("--token-file", e.tokenFile, err)
		}
	}
	if e.ca != "" {
		abs, err := filepath.Abs(e.ca)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return flagFile("--ca", e.ca, fmt.Errorf("--ca: %w", err))
		}
		e.ca = abs
	}
	return nil
}

// apply changes the fields given in c.
func (e *contextEdit) apply(c *client.Context) error {
	if e.changed("addr") {
		c.Addr = e.addr
	}
	if e.changed("ca") {
		c.CA, c.CAPin = e.ca, ""
	}
	if e.changed("ca-pin") {
		c.CAPin, c.CA = e.caPin, ""
	}
	if e.changed("node") {
		c.Node = e.node
	}
	// One credential at a time: a new one replaces the others.
	if e.changed("token-file") {
		c.Token, c.TokenCommand, c.OIDC = e.token, nil, nil
	}
	if e.changed("token-command") {
		c.Token, c.TokenCommand, c.OIDC = "", strings.Fields(e.tokenCommand), nil
	}
	if c.Addr == "" {
		// A new context without --addr: a flag left out, as any
		// required one is.
		return usagef("context %q needs an address: give --addr HOST:PORT", e.name)
	}
	return nil
}
