// Package fakeoauth is an in-process fake OAuth token endpoint on
// 127.0.0.1 for custody tests. It behaves as the vendors' endpoints do for
// subscription logins: every refresh rotates the refresh token, and a
// refresh token presented a second time is taken as theft, so the whole
// token family (every access and refresh token descended from one login)
// is revoked. Access tokens are JWT-shaped (header.claims.sig, claims with
// exp) because Codex reads exp from them; their lifetime runs on the
// provider's clock, which tests may move.
package fakeoauth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Grant is what a login or a refresh returns.
type Grant struct {
	Family    string
	Access    string
	Refresh   string
	IDToken   string
	ExpiresAt time.Time
	IssuedAt  time.Time
}

type family struct {
	revoked bool
	why     string
	current string          // the refresh token that may be used next
	used    map[string]bool // refresh tokens already spent
}

type access struct {
	family  string
	expires time.Time
}

// Server is the fake provider.
type Server struct {
	URL string // http://127.0.0.1:port, token endpoint at URL+TokenPath

	srv *http.Server

	mu        sync.Mutex
	now       func() time.Time
	lifetime  time.Duration
	families  map[string]*family
	refreshOf map[string]string // refresh token -> family
	accesses  map[string]access
	refreshes int
	onRefresh func(old string) // test hook, before the rotation is answered
}

// TokenPath is where the token endpoint listens (Claude's and Codex's
// both end in /oauth/token).
const TokenPath = "/v1/oauth/token"

// Start serves on 127.0.0.1 until the test ends. lifetime is how long an
// access token lives.
func Start(t testing.TB, lifetime time.Duration) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakeoauth: %v", err)
	}
	s := &Server{
		URL: "http://" + ln.Addr().String(), now: time.Now, lifetime: lifetime,
		families: map[string]*family{}, refreshOf: map[string]string{}, accesses: map[string]access{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveToken) // Codex posts to whatever URL its override names
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// SetClock makes the provider tell time by now (a simulated clock).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// OnRefresh runs fn (outside the lock) with the presented refresh token
// before each refresh is answered.
func (s *Server) OnRefresh(fn func(old string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRefresh = fn
}

// Login starts a new token family, as a user's browser login does.
func (s *Server) Login() Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "fam-" + randHex(6)
	s.families[id] = &family{used: map[string]bool{}}
	return s.issue(id)
}

func (s *Server) issue(fam string) Grant {
	now := s.now()
	g := Grant{Family: fam, Refresh: "rt-" + randHex(16), IssuedAt: now, ExpiresAt: now.Add(s.lifetime)}
	g.Access = jwt(map[string]any{"exp": g.ExpiresAt.Unix(), "iat": now.Unix(), "jti": randHex(8)})
	g.IDToken = jwt(map[string]any{
		"exp": g.ExpiresAt.Unix(), "iat": now.Unix(), "email": "fleet@example.test",
		"https://api.openai.com/auth": map[string]any{"chatgpt_plan_type": "pro", "chatgpt_account_id": "acct-" + fam},
	})
	f := s.families[fam]
	f.current = g.Refresh
	s.refreshOf[g.Refresh] = fam
	s.accesses[g.Access] = access{family: fam, expires: g.ExpiresAt}
	return g
}

// Refresh is the token endpoint's logic, callable without HTTP.
func (s *Server) Refresh(refresh string) (Grant, error) {
	s.mu.Lock()
	hook := s.onRefresh
	s.mu.Unlock()
	if hook != nil {
		hook(refresh)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshes++
	fam, ok := s.refreshOf[refresh]
	if !ok {
		return Grant{}, fmt.Errorf("invalid_grant: unknown refresh token")
	}
	f := s.families[fam]
	if f.revoked {
		return Grant{}, fmt.Errorf("invalid_grant: refresh token revoked")
	}
	if f.used[refresh] || refresh != f.current {
		f.revoked, f.why = true, "refresh token reused"
		return Grant{}, fmt.Errorf("invalid_grant: refresh_token_reused")
	}
	f.used[refresh] = true
	return s.issue(fam), nil
}

// Valid says whether access is a live token of a family in good standing
// at the provider's time; the reason when not.
func (s *Server) Valid(tok string) (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accesses[tok]
	switch {
	case !ok:
		return false, "unknown access token"
	case s.families[a.family].revoked:
		return false, "family revoked (" + s.families[a.family].why + ")"
	case !s.now().Before(a.expires):
		return false, "access token expired"
	}
	return true, ""
}

// Revoked lists the families revoked so far, with why.
func (s *Server) Revoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, f := range s.families {
		if f.revoked {
			out = append(out, id+": "+f.why)
		}
	}
	return out
}

// Refreshes counts refresh requests (answered or refused).
func (s *Server) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshes
}

// serveToken answers a refresh_token grant in JSON or form encoding, the
// way Claude (JSON) and Codex (JSON) post it, with both vendors' fields.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	var in struct {
		GrantType    string `json:"grant_type"`
		RefreshToken string `json:"refresh_token"`
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&in); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
			return
		}
	} else {
		_ = r.ParseForm()
		in.GrantType, in.RefreshToken = r.PostForm.Get("grant_type"), r.PostForm.Get("refresh_token")
	}
	if in.GrantType != "refresh_token" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	g, err := s.Refresh(in.RefreshToken)
	if err != nil {
		code := "refresh_token_invalidated"
		if strings.Contains(err.Error(), "reused") {
			code = "refresh_token_reused"
		}
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": code, "message": err.Error()}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": g.Access, "refresh_token": g.Refresh, "id_token": g.IDToken,
		"expires_in": int(g.ExpiresAt.Sub(g.IssuedAt).Seconds()), "token_type": "Bearer",
		"scope": "user:inference user:profile",
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func jwt(claims map[string]any) string {
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "." + enc.EncodeToString([]byte(randHex(8)))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
