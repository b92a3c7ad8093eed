package client

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/netaddr"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
)

// Contexts: ~/.config/cast/config.yaml (XDG_CONFIG_HOME respected, mode
// 0600) names control planes and the credentials for each, as kubeconfig
// does:
//
//	current-context: dev
//	contexts:
//	  dev:
//	    addr: 127.0.0.1:7777
//	    token: cast_...
//	    node: mybox
//	  work:
//	    addr: cast.example.com:7777
//	    ca: /home/me/.config/cast/work-ca.pem
//	    token-command: [my-oidc-helper, get-token, --audience, cast]
//	  sso:
//	    addr: cast.example.com:7777
//	    token: eyJ...           # `cast login`'s ID token, renewed by:
//	    oidc: {issuer: https://accounts.example.com, client-id: cast, refresh-token: ...}
//
// A context's token and CA go only to its own address: with CAST_ADDR or
// --addr naming another, only credentials from the env are used.
// Env wins over the file: CAST_CONTEXT picks a context, CAST_ADDR,
// CAST_TOKEN (or CAST_TOKEN_FILE, a 0600 file holding it), CAST_CACERT (a
// CA file), CAST_CA_PIN and CAST_CLIENT_CERT (a client certificate and
// its key in one 0600 file) override its fields. A context's
// token-command (tokencmd.go) gives the token instead of a token field;
// CAST_TOKEN still wins over it.

// Context is one control plane and the credential to use there.
type Context struct {
	Addr  string `yaml:"addr"`
	Token string `yaml:"token,omitempty"`
	// TokenCommand prints the token (an OIDC ID token): argv, run without
	// a shell, its stdout cached until the token's exp. Instead of Token.
	TokenCommand []string `yaml:"token-command,omitempty"`
	// CA is a CA certificate file to trust (TLS); CAPin trusts the CA by
	// its public key instead ("sha256:..."). Neither: plaintext.
	CA    string `yaml:"ca,omitempty"`
	CAPin string `yaml:"ca-pin,omitempty"`
	// Cert is a client certificate file (chain and key, 0600; `cast
	// token cert`, or a node's identity): with TLS it is presented
	// instead of the token.
	Cert string `yaml:"cert,omitempty"`
	// Insecure allows a token over plaintext to a non-loopback address
	// (CAST_INSECURE=1); without it such a dial is refused.
	Insecure bool `yaml:"insecure,omitempty"`
	// OIDC is where `cast login` got Token (an ID token): a new one comes
	// from its refresh token when Token expires (oidclogin.go).
	OIDC *OIDCLogin `yaml:"oidc,omitempty"`
	// Node is the node on this machine (`controlplane --dev` and `cast
	// node join` write it): a new session without --node goes there.
	Node string `yaml:"node,omitempty"`
	// tokenCache is where TokenCommand's tokens are cached (Resolve sets
	// it; "": in memory only).
	tokenCache string
	// file and name are the contexts file and the context c came from
	// (Resolve sets them), where a refreshed OIDC login is stored.
	file, name string
	// ctxName names the context c came from whole (its address not
	// overridden): errors name it in the command that fixes them.
	ctxName string
	// syncCA: CA is the context's own file (not CAST_CACERT's), which
	// Dial keeps up to date through a CA rotation (bundle.go).
	syncCA bool
}

// allLoopback is true when every replica addr names is on loopback.
func allLoopback(addr string) bool {
	addrs := Addrs(addr)
	for _, a := range addrs {
		if !netaddr.IsLoopback(a) {
			return false
		}
	}
	return len(addrs) > 0
}

// Loopback is true when c's address is on this machine only.
func (c Context) Loopback() bool { return allLoopback(c.Addr) }

// ContextName is the context c's address came from, "" when --addr,
// CAST_ADDR or the default chose another.
func (c Context) ContextName() string { return c.ctxName }

// CheckPlaintext refuses to send credentials in clear off this machine.
func CheckPlaintext(addr string, t *tls.Config, insecure bool) error {
	if t != nil || insecure || allLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%s is not loopback and no CA is set, so the token would cross the network in clear: trust the control plane's CA (CAST_CACERT, CAST_CA_PIN, node --ca-pin) or accept plaintext with CAST_INSECURE=1 / --insecure", addr)
}

// TLS returns the TLS config c asks for, nil for plaintext. A client
// certificate goes with it when c has one.
func (c Context) TLS() (*tls.Config, error) {
	t, err := c.serverTrust()
	if err != nil || t == nil || c.Cert == "" {
		return t, err
	}
	id, err := LoadIdentity(c.Cert)
	if err != nil {
		return nil, err
	}
	if !id.HasCert() {
		return nil, fmt.Errorf("client certificate %s: no such file", c.Cert)
	}
	id.reload = true
	return WithIdentity(t, id), nil
}

func (c Context) serverTrust() (*tls.Config, error) {
	switch {
	case c.CAPin != "":
		return pki.PinnedConfig(c.CAPin)
	case c.CA != "":
		return fileTrust(c.CA)
	}
	return nil, nil
}

// Dial dials c's address with its token and TLS.
func (c Context) Dial() (*Client, error) {
	t, err := c.TLS()
	if err != nil {
		return nil, err
	}
	if CheckPlaintext(c.Addr, t, c.Insecure) != nil {
		// Said in cast's terms: CheckPlaintext's names a node's flags.
		name := c.ctxName
		if name == "" {
			name = "NAME"
		}
		return nil, fmt.Errorf("%s is not loopback and no CA is set, so the token would cross the network in clear: trust the control plane's CA with `cast config set-context %s --ca-pin sha256:...` (the pin the control plane logs at start; or --ca FILE, env CAST_CA_PIN, CAST_CACERT), or accept plaintext with env CAST_INSECURE=1", c.Addr, name)
	}
	o := Options{Token: c.bearer(), TLS: t, RetryExpiredCert: c.Cert != ""}
	if c.syncCA && c.CAPin == "" {
		o.Bundle = FileBundleSync(c.CA, func(err error) {
			fmt.Fprintf(os.Stderr, "cast: the control plane's CA bundle changed and %s was not updated: %v\n", c.CA, err)
		})
	}
	return DialOpts(c.Addr, o)
}

// bearer is the token c sends: its token-command's, else its token.
func (c Context) bearer() *Token {
	if len(c.TokenCommand) > 0 {
		return CommandToken(c.TokenCommand, c.tokenCache)
	}
	if c.OIDC != nil && c.Token != "" {
		return c.bearerOIDC()
	}
	return NewToken(c.Token)
}

// Config is the contexts file.
type Config struct {
	CurrentContext string              `yaml:"current-context,omitempty"`
	Contexts       map[string]*Context `yaml:"contexts,omitempty"`
}

// ConfigPath is where the contexts file lives for env (os.Getenv-like).
func ConfigPath(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "cast", "config.yaml")
	}
	return filepath.Join(getenv("HOME"), ".config", "cast", "config.yaml")
}

// BesideConfig is the path of the file name kept beside the contexts file
// for env (os.Getenv-like): the export log, a context's client
// certificate, the secrets key outside --dev.
func BesideConfig(getenv func(string) string, name string) string {
	return filepath.Join(filepath.Dir(ConfigPath(getenv)), name)
}

// LoadConfig reads path; a missing file is an empty Config.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s holds credentials and must not be readable by others (chmod 600 %s)", path, path)
	}
	c := &Config{}
	if err := yaml.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// SetContext stores ctx under name in the file at path (created 0600,
// written atomically) and makes it current.
func SetContext(path, name string, ctx Context) error {
	return editConfig(path, func(c *Config) error {
		if c.Contexts == nil {
			c.Contexts = map[string]*Context{}
		}
		c.Contexts[name] = &ctx
		c.CurrentContext = name
		return nil
	})
}

// editConfig reads the file at path, applies fn and writes it back, all
// under the file's lock (path + ".lock"): two processes changing it at
// once (`cast` refreshing OIDC logins of two contexts) would otherwise
// each write back the other's context as it read it, losing a rotated
// refresh token the issuer has already retired the old one of.
func editConfig(path string, fn func(*Config) error) error {
	lock, err := fsutil.LockFile(path+".lock", true)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	c, err := LoadConfig(path)
	if err != nil {
		return err
	}
	if err := fn(c); err != nil {
		return err
	}
	return c.save(path)
}

// NeedContext is the context a command that writes into one acts on
// (`cast login`, `cast token cert`), and its name: the one named (flag,
// else CAST_CONTEXT), else the file's current one. None, or a name the
// file lacks, is a *NoContextError.
func NeedContext(getenv func(string) string, flag string) (string, *Context, error) {
	path := ConfigPath(getenv)
	c, err := LoadConfig(path)
	if err != nil {
		return "", nil, err
	}
	name := cmp.Or(flag, getenv("CAST_CONTEXT"), c.CurrentContext)
	if c.Contexts[name] == nil {
		return "", nil, c.noContext(name, path)
	}
	return name, c.Contexts[name], nil
}

// UpdateContext changes the existing context name in the file at path.
func UpdateContext(path, name string, fn func(*Context)) error {
	return editConfig(path, func(c *Config) error {
		ctx := c.Contexts[name]
		if ctx == nil {
			return c.noContext(name, path)
		}
		fn(ctx)
		return nil
	})
}

// EditContext changes context name in the file at path, making it (with
// fn's fields) when it is not there, as kubectl's set-context does: the
// current context stays as it was. created says it was made.
func EditContext(path, name string, fn func(*Context) error) (created bool, err error) {
	err = editConfig(path, func(c *Config) error {
		if c.Contexts == nil {
			c.Contexts = map[string]*Context{}
		}
		ctx := c.Contexts[name]
		if ctx == nil {
			ctx, created = &Context{}, true
		}
		if err := fn(ctx); err != nil {
			return err
		}
		if ctx.Addr == "" {
			return fmt.Errorf("context %q needs an address: give --addr HOST:PORT", name)
		}
		c.Contexts[name] = ctx
		return nil
	})
	if err != nil {
		return false, err
	}
	return created, nil
}

// UseContext makes the existing context name current in the file at path.
func UseContext(path, name string) error {
	return editConfig(path, func(c *Config) error {
		if c.Contexts[name] == nil {
			return c.noContext(name, path)
		}
		c.CurrentContext = name
		return nil
	})
}

// noContext is the error for a context name ("": none named, none
// current) the file at path lacks.
func (c *Config) noContext(name, path string) error {
	return &NoContextError{Name: name, Path: path, Have: c.Names()}
}

// Names are the file's contexts, sorted.
func (c *Config) Names() []string { return slices.Sorted(maps.Keys(c.Contexts)) }

// NoContextError is a context a command needs that the contexts file
// lacks: one named (Name), or none at all (Name ""). Every command says it
// this one way: the names the file has (a typo is then plain), or how to
// make one.
type NoContextError struct {
	Name string
	Path string   // the contexts file
	Have []string // its contexts, sorted
}

func (e *NoContextError) Error() string {
	switch {
	case e.Name == "" && len(e.Have) == 0:
		return fmt.Sprintf("no context in %s; `cast config set-context NAME --addr HOST:PORT` makes one (controlplane --dev writes one)", e.Path)
	case e.Name == "":
		return fmt.Sprintf("no current context in %s; name one with --context NAME (it has %s) or `cast config use-context NAME`", e.Path, strings.Join(e.Have, ", "))
	case len(e.Have) == 0:
		return fmt.Sprintf("no context %q in %s, which has none; `cast config set-context %s --addr HOST:PORT` makes it", e.Name, e.Path, e.Name)
	}
	return fmt.Sprintf("no context %q in %s; it has %s", e.Name, e.Path, strings.Join(e.Have, ", "))
}

func (c *Config) save(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return fsutil.WritePrivate(path, b)
}

// Resolve picks the address and token to use: the named context (or
// CAST_CONTEXT, or the file's current one), then env overrides. addrFlag,
// when not "", beats all of them.
func Resolve(getenv func(string) string, contextName, addrFlag string) (Context, error) {
	cfg, err := LoadConfig(ConfigPath(getenv))
	if err != nil {
		return Context{}, err
	}
	contextName, chosen, err := cfg.pick(getenv, contextName)
	if err != nil {
		return Context{}, err
	}
	out, err := withEnv(getenv, chosen, addrFlag)
	if err != nil {
		return Context{}, err
	}
	out.syncCA = out.CA != "" && out.CA == chosen.CA && out.CAPin == ""
	if out.Addr == chosen.Addr {
		out.ctxName = contextName
	}
	if out.OIDC != nil {
		if out.Token != chosen.Token { // CAST_TOKEN won: not the login's token
			out.OIDC = nil
		} else {
			out.file, out.name = ConfigPath(getenv), contextName
		}
	}
	if len(out.TokenCommand) > 0 {
		if out.Token != "" {
			return Context{}, fmt.Errorf("context %q in %s has both token and token-command: keep one", contextName, ConfigPath(getenv))
		}
		if out.TokenCommand[0] == "" {
			return Context{}, fmt.Errorf("context %q in %s: token-command must start with the program to run", contextName, ConfigPath(getenv))
		}
		out.tokenCache = TokenCacheDir(getenv)
	}
	return out, nil
}

// pick is the context Resolve starts from, and its name: the one named
// (or CAST_CONTEXT), else the file's current one, else one with the
// default address alone.
func (c *Config) pick(getenv func(string) string, name string) (string, Context, error) {
	if name == "" {
		name = getenv("CAST_CONTEXT")
	}
	out := Context{Addr: DefaultAddr}
	switch named := c.Contexts[name]; {
	case name != "" && named == nil:
		return "", Context{}, c.noContext(name, ConfigPath(getenv))
	case named != nil:
		out = *named
	case c.Contexts[c.CurrentContext] != nil:
		name, out = c.CurrentContext, *c.Contexts[c.CurrentContext]
	}
	return name, out, nil
}

// withEnv is the context chosen with the env's overrides, and addrFlag's
// (when not "") over all of them.
func withEnv(getenv func(string) string, chosen Context, addrFlag string) (Context, error) {
	out := chosen
	if v := getenv("CAST_ADDR"); v != "" {
		out.Addr = v
	}
	if addrFlag != "" {
		out.Addr = addrFlag
	}
	if out.Addr != chosen.Addr {
		// A context's credentials go only to its own address: another
		// address gets only what the env gives.
		out.Token, out.CA, out.CAPin, out.Cert, out.TokenCommand, out.OIDC = "", "", "", "", nil, nil
		out.Node = "" // a node of the context's control plane, not this one's
	}
	if v := getenv("CAST_CACERT"); v != "" {
		out.CA, out.CAPin = v, ""
	}
	if v := getenv("CAST_CA_PIN"); v != "" {
		out.CAPin = v
	}
	if v := getenv("CAST_CLIENT_CERT"); v != "" {
		out.Cert = v
	}
	if getenv("CAST_INSECURE") == "1" {
		out.Insecure = true
	}
	if v := getenv("CAST_TOKEN"); v != "" {
		out.Token, out.TokenCommand = strings.TrimSpace(v), nil
	} else if f := getenv("CAST_TOKEN_FILE"); f != "" {
		var err error
		if out.Token, err = secrets.ReadToken(f); err != nil {
			return Context{}, fmt.Errorf("CAST_TOKEN_FILE: %w", err)
		}
		out.TokenCommand = nil
	}
	return out, nil
}

// OIDCLogin is the OpenID Connect login `cast login` made for a context.
type OIDCLogin struct {
	Issuer   string `yaml:"issuer"`
	ClientID string `yaml:"client-id"`
	// RefreshToken gets a new ID token without a new login; "" when the
	// issuer gave none (then `cast login` again when the token expires).
	RefreshToken string `yaml:"refresh-token,omitempty"`
}
