package web

import (
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/errs"
)

// dist is the built app (app/: npm run build). all: keeps Vite's files
// whatever their names.
//
//go:embed all:dist
var dist embed.FS

// SessionCookie is the name of the browser session's cookie on host (as
// the browser asked for it, with its port): HttpOnly, SameSite=Strict,
// Secure over HTTPS; its value is a random id only the control plane's
// can map to a principal. A browser keys cookies by host, not port, so
// the port is in the name: two control planes on one host (localhost:7780
// and :7781) would otherwise replace each other's sign-in. Over HTTPS it
// is a __Host- cookie: no other host, a subdomain's page included, can set
// it.
func SessionCookie(host string, secure bool) string {
	name := "cast_web" + portSuffix(host)
	if secure {
		name = "__Host-" + name
	}
	return name
}

// portSuffix is "_PORT" for a host with a port ("" without): what keeps
// the cookies of two listeners on one host apart.
func portSuffix(host string) string {
	if _, port, err := net.SplitHostPort(host); err == nil && port != "" {
		return "_" + port
	}
	return ""
}

// APIPrefix starts every API path (/cast.v1.SessionService/ListSessions).
const APIPrefix = "/cast.v1."

type callerKey struct{}

// caller is a call's browser session: its principal, the hash its
// grant is kept by and its end.
type caller struct {
	p       authz.Principal
	session string
	until   time.Time
}

// Caller is the principal a browser session signed in as, when the call
// came through the web app's API with a live session cookie. The control
// plane's authentication takes it instead of a bearer token, and checks
// its credential is still live.
func Caller(ctx context.Context) (authz.Principal, bool) {
	c, ok := ctx.Value(callerKey{}).(caller)
	return c.p, ok
}

// CallerSession is the hash of the browser session a call came with (""
// for none): the store keeps the session by it (SessionGrants), and its
// deletion (sign-out, expiry) ends the session's open calls.
func CallerSession(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c.session
}

// SessionGrants is the kind of grant browser sessions are kept as
// (Grants; store.FollowWebGrantEnds).
const SessionGrants = kindSession

// Handler serves the app, its sign-in and its API (api: the transcoder
// onto the gRPC server).
type Handler struct {
	logins *Logins
	api    http.Handler
	static http.Handler
	secure bool   // the HTTPS listener
	public string // the app's address as browsers reach it (--web-url; "" : the listener's)
	// publicOrigin is public's scheme and host, as a browser's Origin
	// names it ("" without a --web-url).
	publicOrigin string
	oidc         *oidcFlow // nil: no OIDC sign-in
	lg           *zap.Logger
	callTimeout  time.Duration // a unary API call's deadline when it brings none
	// callLimits: unary methods whose own wait is longer (Config.CallLimits).
	callLimits map[string]time.Duration
	refusal    func(error) error // Config.Refusal
}

// CallTimeout is the deadline of a browser's unary API call that brings
// none (the app sends none). Its handler's store calls wait for etcd as
// long as the call's context lets them, so without one a page hangs while
// etcd is away; with one the call ends DEADLINE_EXCEEDED (504: its outcome
// unknown, retry). It is well past the longest wait a call the app makes
// has of its own: a handoff's brief, a model call of up to 90 s. A method
// whose own limit is longer (Config.CallLimits) gets that limit and
// CallMargin instead.
const CallTimeout = 3 * time.Minute

// CallMargin is what a method with a limit of its own gets past it, for
// its store calls around the wait: the method answers its own timeout
// before the call's deadline passes.
const CallMargin = 30 * time.Second

// NewHandler serves api under APIPrefix for signed-in browsers, on the
// HTTPS listener (secure) or a plain one, known to browsers as public
// ("" : as the listener); refusal is Config.Refusal.
func NewHandler(logins *Logins, api http.Handler, secure bool, public string, refusal func(error) error, lg *zap.Logger) *Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: it is there or the build failed
	}
	h := &Handler{logins: logins, api: api, static: http.FileServerFS(sub), secure: secure, public: public, lg: lg, callTimeout: CallTimeout, refusal: refusal}
	if u, err := url.Parse(public); err == nil && u.Scheme != "" && u.Host != "" {
		h.publicOrigin = u.Scheme + "://" + u.Host
	}
	return h
}

// https says browsers reach the app over HTTPS, and so get Secure cookies:
// on the HTTPS listener, or through a TLS proxy in front of a plain one
// (an https --web-url). A cookie without Secure would also go, in clear,
// with any request to the host's plain http:// address.
func (h *Handler) https() bool {
	return h.secure || strings.HasPrefix(h.public, "https://")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	switch {
	case strings.HasPrefix(r.URL.Path, APIPrefix):
		h.serveAPI(w, r)
	case r.URL.Path == "/auth/login":
		h.login(w, r)
	case r.URL.Path == "/auth/logout":
		h.logout(w, r)
	case r.URL.Path == "/auth/methods":
		h.methods(w, r)
	case r.URL.Path == "/auth/oidc" && h.oidc != nil:
		h.oidc.start(w, r)
	case r.URL.Path == "/auth/oidc/callback" && h.oidc != nil:
		h.oidc.callback(w, r)
	default:
		// The app's own scripts and styles only; images are data: URLs.
		hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.static.ServeHTTP(w, r)
	}
}

// serveAPI hands a call to the transcoder with the cookie's principal in
// its context. A cross-site request is refused (a page elsewhere cannot
// call the API with this browser's cookie; SameSite=Strict says the same),
// and a bearer header is dropped: on this listener the cookie is the only
// credential, so there is one way in to reason about. Every refusal here
// carries the code and reason the API would give (refuse).
func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request) {
	if !h.sameOrigin(r) {
		h.refuse(w, r, errs.New(errs.KindPermissionDenied, errs.ReasonPermissionDenied, "cross-origin request refused: the API answers the app's own pages only"))
		return
	}
	if err := callRefusal(r); err != nil {
		h.refuse(w, r, err)
		return
	}
	r.Header.Del("Authorization")
	h.defaultDeadline(r)
	if c, err := r.Cookie(SessionCookie(r.Host, h.https())); err == nil {
		g, ok, err := h.logins.live(r.Context(), kindSession, c.Value)
		if err != nil {
			h.lg.Warn("web session lookup failed", zap.Error(err))
			h.refuse(w, r, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "the control plane's store did not answer; retry"))
			return
		}
		if ok {
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller{p: g.P, session: digest(c.Value), until: g.Until}))
		}
	}
	h.api.ServeHTTP(w, r)
}

// defaultDeadline gives a unary call that brings no deadline one, in its
// protocol's header (vanguard turns it into the gRPC server's): by
// Connect (the app's) or gRPC-Web alike. Streams (WatchSession, open as
// long as a page is) get none. Which calls are unary is the method's
// descriptor's to say, not the request's content type: a Connect unary
// call may be a GET without one.
func (h *Handler) defaultDeadline(r *http.Request) {
	if !unary(r.URL.Path) {
		return
	}
	d := h.callTimeout
	if own, ok := h.callLimits[r.URL.Path]; ok && own+CallMargin > d {
		d = own + CallMargin
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") { // gRPC-Web, or gRPC
		if r.Header.Get("Grpc-Timeout") == "" {
			r.Header.Set("Grpc-Timeout", strconv.FormatInt(d.Milliseconds(), 10)+"m") // at most 8 digits: 27 hours
		}
		return
	}
	if r.Header.Get("Connect-Timeout-Ms") == "" {
		r.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(d.Milliseconds(), 10))
	}
}

// unary says path ("/cast.v1.Service/Method") names a method that is
// neither client- nor server-streaming, by the registry the transcoder
// resolves methods in too. An unknown one is not: the transcoder answers
// it not found.
func unary(path string) bool {
	m, ok := apiMethod(path)
	return ok && !m.IsStreamingClient() && !m.IsStreamingServer()
}

// sameOrigin accepts a request without Origin (not a browser's
// cross-site fetch) or one whose Origin is this host. On HTTPS (secure)
// the scheme must be https too: a page served over plain HTTP on the same
// host and port, which anyone on the network can forge, is another
// origin. A plain listener may sit behind a TLS proxy (--web-url https://),
// so there either scheme is the app's; and the --web-url's own origin is
// the app's whatever Host the proxy sends (nginx sends its upstream's).
func (h *Handler) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	return o == "https://"+r.Host || (!h.secure && o == "http://"+r.Host) || (h.publicOrigin != "" && o == h.publicOrigin)
}

// loginPage asks before a login link signs the browser in. Opening the
// link alone must not: an attacker's own link, sent to a victim, would
// sign the victim in as the attacker, who then reads what the victim does
// there (login CSRF). The page names whom it signs in as; its POST is the
// sign-in, and a page elsewhere cannot make it (sameOrigin).
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>cast: sign in</title></head>
<body><form method="post" action="/auth/login">
<p>Sign in to cast as <strong>{{.Principal}}</strong>? Continue only if you made this link yourself (<code>cast web</code>).</p>
<input type="hidden" name="code" value="{{.Code}}">
<button type="submit">Sign in</button>
</form></body></html>
`))

// login shows, on GET, the page asking to sign in with a one-time code;
// on a same-origin POST from it, exchanges the code for a session cookie
// and sends the browser to the app, leaving the code out of its address
// bar.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		h.askLogin(w, r)
	case http.MethodPost:
		h.signIn(w, r)
	default:
		http.Error(w, "GET or POST only", http.StatusMethodNotAllowed)
	}
}

func (h *Handler) askLogin(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	p, ok, err := h.logins.Peek(r.Context(), code)
	if h.codeRefused(w, ok, err) {
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	// A browser sends "Origin: null" with a form's POST from a page whose
	// referrer policy is no-referrer (every other page's), and sameOrigin
	// refuses that; same-origin still keeps the code in this page's address
	// from any other site.
	hdr.Set("Referrer-Policy", "same-origin")
	if err := loginPage.Execute(w, struct{ Principal, Code string }{p.String(), code}); err != nil {
		h.lg.Warn("web login page not sent", zap.Error(err))
	}
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	if !h.sameOrigin(r) {
		http.Error(w, "cross-origin sign-in refused", http.StatusForbidden)
		return
	}
	s, ok, err := h.logins.Exchange(r.Context(), r.PostFormValue("code"))
	if h.codeRefused(w, ok, err) {
		return
	}
	h.lg.Info("web sign-in", zap.String("principal", s.P.String()))
	h.logins.replaced(r.Context(), presentedSession(r, h.https()), h.lg)
	h.logins.setSession(w, r, s, h.https())
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// codeRefused answers a login code's look-up that failed (err) or found
// the code unknown, used or expired (!ok), and says whether it did. A
// failure is the store's (not answering, or not in time), not the link's:
// the browser is told to retry (503), as every other sign-in store
// failure answers.
func (h *Handler) codeRefused(w http.ResponseWriter, ok bool, err error) bool {
	if err != nil {
		h.lg.Warn("web login code lookup failed", zap.Error(err))
		http.Error(w, "the control plane's store did not answer; retry", http.StatusServiceUnavailable)
		return true
	}
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("This login link is used or expired. Run `cast web` for a new one.\n"))
		return true
	}
	return false
}

// presentedSession is the hash of the session cookie r came with ("" for
// none).
func presentedSession(r *http.Request, secure bool) string {
	if c, err := r.Cookie(SessionCookie(r.Host, secure)); err == nil && c.Value != "" {
		return digest(c.Value)
	}
	return ""
}

// setSession sets the session cookie of s, until s ends: a session
// capped sooner (an ID token's exp, the browser session that made its
// link) would otherwise leave the browser a cookie the store has dropped.
func (l *Logins) setSession(w http.ResponseWriter, r *http.Request, s SignIn, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie(r.Host, secure), Value: s.ID, Path: "/", HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: max(int(s.Until.Sub(l.now())/time.Second), 1)})
}

// methods tells the app which sign-ins this replica offers.
func (h *Handler) methods(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]bool{"link": true, "oidc": h.oidc != nil})
}

// logout ends the session (POST, same origin).
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !h.sameOrigin(r) {
		http.Error(w, "POST from the app only", http.StatusMethodNotAllowed)
		return
	}
	name := SessionCookie(r.Host, h.https())
	if c, err := r.Cookie(name); err == nil {
		if err := h.logins.End(r.Context(), c.Value); err != nil {
			http.Error(w, "sign-out failed; retry", http.StatusServiceUnavailable)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", HttpOnly: true,
		Secure: h.https(), SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}
