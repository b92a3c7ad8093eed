package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/web"
)

// The API and sign-out answer only the app's own origin: scheme, host and
// port. On the HTTPS listener a page served over plain HTTP from the same
// host and port (what a network attacker can inject) is another origin;
// behind a TLS proxy the plain listener sees the browser's https origin,
// which is the --web-url's whatever Host the proxy sends.
func TestOnlyTheAppsOriginReachesTheAPI(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, tc := range []struct {
		name   string
		secure bool
		public string // --web-url
		origin string
		want   int
	}{
		{"https app on the HTTPS listener", true, "", "https://cast.test:7780", http.StatusOK},
		{"http page on the HTTPS listener", true, "", "http://cast.test:7780", http.StatusForbidden},
		{"http app on the plain listener", false, "", "http://cast.test:7780", http.StatusOK},
		{"https proxy before the plain listener", false, "", "https://cast.test:7780", http.StatusOK},
		{"another host", true, "", "https://evil.test:7780", http.StatusForbidden},
		{"no origin (not a browser's cross-site call)", true, "", "", http.StatusOK},
		// A proxy that sends the listener its own Host (nginx's default):
		// the browser's origin is the --web-url's.
		{"--web-url's origin through a proxy", false, "https://cast.example.com", "https://cast.example.com", http.StatusOK},
		{"--web-url's host over http", false, "https://cast.example.com", "http://cast.example.com", http.StatusForbidden},
		{"another host with a --web-url", false, "https://cast.example.com", "https://evil.example.com", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := web.NewHandler(web.NewLogins(nil, 0, 0), api, tc.secure, tc.public, controlplane.StatusOf, zaptest.NewLogger(t))
			for _, path := range []string{"/cast.v1.AuthService/WhoAmI", "/auth/logout"} {
				req := httptest.NewRequest(http.MethodPost, "https://cast.test:7780"+path, nil)
				req.Host = "cast.test:7780"
				req.Header.Set("Content-Type", "application/json") // a Connect call (sign-out ignores it)
				if tc.origin != "" {
					req.Header.Set("Origin", tc.origin)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				got := rec.Code
				if path == "/auth/logout" && got == http.StatusNoContent {
					got = http.StatusOK
				}
				if path == "/auth/logout" && got == http.StatusMethodNotAllowed {
					got = http.StatusForbidden // the refusal of a request not from the app
				}
				if got != tc.want {
					t.Errorf("%s with Origin %q: %d, want %d", path, tc.origin, rec.Code, tc.want)
				}
			}
		})
	}
}
