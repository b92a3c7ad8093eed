package testharness

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var loginCode = regexp.MustCompile(`name="code" value="([0-9a-f]+)"`)

// OpenLoginLink signs browser in with a one-time login link as a person
// would: it opens the link, which asks, and posts the page's form from the
// page's origin. It returns the sign-in's last response (the app, after
// the redirect) or, when the link does not ask (used, expired), the
// link's own.
func OpenLoginLink(t testing.TB, browser *http.Client, link string) *http.Response {
	t.Helper()
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := loginCode.FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		return resp
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, u.Scheme+"://"+u.Host+"/auth/login", strings.NewReader(url.Values{"code": {string(m[1])}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", u.Scheme+"://"+u.Host)
	if resp, err = browser.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
