package treemove

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/ids"
)

// Upstream is the branch's upstream, as branch.<name>.remote and .merge.
type Upstream struct {
	Remote string `json:"remote"`
	Merge  string `json:"merge"` // the branch on the remote: refs/heads/...
}

// Tracking is one remote-tracking ref (refs/remotes/<remote>/<branch>).
type Tracking struct {
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
}

// Stash is one stash entry: its commit (with the index and untracked
// commits as parents, as git stash made it) and its message.
type Stash struct {
	Commit  string `json:"commit"`
	Message string `json:"message"`
}

// Bounds on what travels in the manifest, which the control plane keeps
// in one etcd value: beyond them the rest is left out (the upstream's
// tracking ref first in, the newest stash entries kept).
const (
	maxTracking   = 1000
	maxStashes    = 100
	maxStashBytes = 1000
)

// upstream is branch's upstream when its remote travels (nil otherwise).
func (r repo) upstream(ctx context.Context, branch string, remotes []Remote) (*Upstream, error) {
	if branch == "" {
		return nil, nil
	}
	u := &Upstream{}
	var err error
	if u.Remote, err = r.git(ctx, "config", "--default", "", "--get", "branch."+branch+".remote"); err != nil {
		return nil, err
	}
	if u.Merge, err = r.git(ctx, "config", "--default", "", "--get", "branch."+branch+".merge"); err != nil {
		return nil, err
	}
	if validUpstream(*u, remotes) != "" {
		return nil, nil
	}
	return u, nil
}

// tracking lists the remote-tracking refs of the remotes that travel
// (symbolic ones like origin/HEAD left out), the upstream's first.
func (r repo) tracking(ctx context.Context, remotes []Remote, up *Upstream) ([]Tracking, error) {
	out, err := r.git(ctx, "for-each-ref", "--format=%(objecttype) %(objectname) %(refname) %(symref)", "refs/remotes/")
	if err != nil || out == "" {
		return nil, err
	}
	var first string
	if up != nil {
		first = "refs/remotes/" + up.Remote + "/" + strings.TrimPrefix(up.Merge, "refs/heads/")
	}
	var list []Tracking
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "commit" { // 4 fields: a symref
			continue
		}
		t := Tracking{Ref: f[2], Commit: f[1]}
		if validTracking(t, remotes) != "" {
			continue
		}
		if t.Ref == first {
			list = append([]Tracking{t}, list...)
		} else {
			list = append(list, t)
		}
	}
	return list[:min(len(list), maxTracking)], nil
}

// stashes lists the stash entries, newest first.
func (r repo) stashes(ctx context.Context) ([]Stash, error) {
	if ok, err := r.exists(ctx, "refs/stash"); err != nil || !ok {
		return nil, err
	}
	out, err := r.git(ctx, "log", "-g", "--format=%H%x09%gs", "refs/stash", "--")
	if err != nil || out == "" {
		return nil, err
	}
	var list []Stash
	for _, line := range strings.Split(out, "\n") {
		c, msg, _ := strings.Cut(line, "\t")
		s := Stash{Commit: c, Message: clipMessage(msg)}
		if validStash(s) == "" && len(list) < maxStashes {
			list = append(list, s)
		}
	}
	return list, nil
}

// clipMessage shortens a stash message to maxStashBytes on a rune
// boundary and drops control characters.
func clipMessage(s string) string {
	s = strings.Map(func(c rune) rune {
		if unsafeRune(c) && c != ' ' {
			return -1
		}
		return c
	}, strings.ToValidUTF8(s, ""))
	for len(s) > maxStashBytes {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// The checks below return why a manifest entry must not reach git (""
// when it may). The manifest comes over the network; the export applies
// the same checks, so a source never sends what a destination refuses.

func validUpstream(u Upstream, remotes []Remote) string {
	if !hasRemote(remotes, u.Remote) {
		return "upstream remote " + quote(u.Remote) + " is not one of the manifest's remotes"
	}
	if b, ok := strings.CutPrefix(u.Merge, "refs/heads/"); !ok || !ids.ValidBranch(b) {
		return "upstream branch " + quote(u.Merge) + " is not a valid refs/heads/ name"
	}
	return ""
}

func validTracking(t Tracking, remotes []Remote) string {
	if !objectID.MatchString(t.Commit) {
		return "tracking ref commit " + quote(t.Commit) + " is not a full commit id"
	}
	if remoteOf(t.Ref, remotes) == "" {
		return "tracking ref " + quote(t.Ref) + " is not refs/remotes/REMOTE/BRANCH of a remote in the manifest"
	}
	return ""
}

func validStash(s Stash) string {
	if !objectID.MatchString(s.Commit) {
		return "stash commit " + quote(s.Commit) + " is not a full commit id"
	}
	if len(s.Message) > maxStashBytes || !utf8.ValidString(s.Message) || strings.ContainsFunc(s.Message, func(c rune) bool { return unsafeRune(c) && c != ' ' }) {
		return "stash message " + quote(s.Message) + " is not one line of text of at most 1000 bytes"
	}
	return ""
}

// remoteOf is the remote of the manifest a remote-tracking ref belongs to
// ("" when none, or the branch part is no valid branch name). Remote
// names may hold slashes, so the longest matching one wins.
func remoteOf(ref string, remotes []Remote) string {
	rest, ok := strings.CutPrefix(ref, "refs/remotes/")
	if !ok {
		return ""
	}
	best := ""
	for _, rm := range remotes {
		if b, ok := strings.CutPrefix(rest, rm.Name+"/"); ok && len(rm.Name) > len(best) && ids.ValidBranch(b) && b != "HEAD" {
			best = rm.Name
		}
	}
	return best
}

func hasRemote(remotes []Remote, name string) bool {
	for _, rm := range remotes {
		if rm.Name == name {
			return true
		}
	}
	return false
}

// validRefs checks the upstream, tracking refs and stash entries of m.
func validRefs(m Manifest) string {
	if m.Upstream != nil {
		if m.Branch == "" {
			return "an upstream needs a branch"
		}
		if why := validUpstream(*m.Upstream, m.Remotes); why != "" {
			return why
		}
	}
	if len(m.Tracking) > maxTracking || len(m.Stashes) > maxStashes {
		return "too many tracking refs or stash entries"
	}
	for _, t := range m.Tracking {
		if why := validTracking(t, m.Remotes); why != "" {
			return why
		}
	}
	for _, s := range m.Stashes {
		if why := validStash(s); why != "" {
			return why
		}
	}
	return ""
}
