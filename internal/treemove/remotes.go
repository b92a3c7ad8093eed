package treemove

import (
	"context"
	"net/url"
	"strings"
	"unicode"
)

// Remote is one git remote of the exported checkout, so the destination
// can fetch and push where the source did.
type Remote struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// remotes lists the checkout's remotes whose URL may travel (safeURL);
// others are left out rather than failing the move.
func (r repo) remotes(ctx context.Context) ([]Remote, error) {
	names, err := r.git(ctx, "remote")
	if err != nil || names == "" {
		return nil, err
	}
	var out []Remote
	for _, name := range strings.Split(names, "\n") {
		u, err := r.git(ctx, "remote", "get-url", "--", name)
		if err != nil {
			return nil, err
		}
		rm := Remote{Name: name, URL: u}
		if validRemote(ctx, r, rm) == "" {
			out = append(out, rm)
		}
	}
	return out, nil
}

// validRemote returns why a remote must not reach git ("" when it may).
// The manifest comes over the network: a name must be a plain remote name
// and a URL a plain location, never a transport helper (ext::, fd::, which
// run commands) or something git would read as an option.
func validRemote(ctx context.Context, r repo, rm Remote) string {
	if rm.Name == "" || strings.HasPrefix(rm.Name, "-") || strings.ContainsFunc(rm.Name, unsafeRune) {
		return "remote name " + quote(rm.Name) + " is not a plain name"
	}
	if _, err := r.git(ctx, "check-ref-format", "refs/remotes/"+rm.Name+"/HEAD"); err != nil {
		return "remote name " + quote(rm.Name) + " is not a valid remote name"
	}
	if !safeURL(rm.URL) {
		return "remote " + rm.Name + " URL " + quote(rm.URL) + " is not a plain https, http, ssh, git or file URL, scp-style address or absolute path"
	}
	return ""
}

func unsafeRune(c rune) bool { return unicode.IsControl(c) || unicode.IsSpace(c) }

// safeURL accepts scheme URLs of the ordinary transports, scp-style
// user@host:path addresses and absolute paths.
func safeURL(u string) bool {
	if u == "" || len(u) > 4096 || strings.HasPrefix(u, "-") || strings.Contains(u, "::") || strings.ContainsFunc(u, unicode.IsControl) {
		return false
	}
	if strings.HasPrefix(u, "/") {
		return true
	}
	if scheme, _, ok := strings.Cut(u, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https", "http", "ssh", "git", "file", "git+ssh", "ssh+git":
			p, err := url.Parse(u)
			return err == nil && (p.Host != "" || strings.EqualFold(scheme, "file"))
		}
		return false
	}
	// scp-style: [user@]host:path, host without a slash before the colon.
	host, path, ok := strings.Cut(u, ":")
	return ok && host != "" && path != "" && !strings.ContainsAny(host, "/\\ ")
}

// addRemotes gives the checkout the source's remotes. A remote the
// destination already has keeps its own URL: the checkout is the user's.
func (r repo) addRemotes(ctx context.Context, remotes []Remote) error {
	have, err := r.git(ctx, "remote")
	if err != nil {
		return err
	}
	existing := map[string]bool{}
	for _, n := range strings.Split(have, "\n") {
		existing[n] = true
	}
	for _, rm := range remotes {
		if existing[rm.Name] {
			continue
		}
		if _, err := r.git(ctx, "remote", "add", "--", rm.Name, rm.URL); err != nil {
			return err
		}
	}
	return nil
}
