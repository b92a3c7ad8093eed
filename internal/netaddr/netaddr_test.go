package netaddr

import (
	"strings"
	"testing"
)

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7777", true},
		{"127.8.9.10:1", true},
		{"[::1]:443", true},
		{"localhost:80", true},
		{"0.0.0.0:7777", false},
		{"10.0.0.1:7777", false},
		{"example.com:443", false},
		{"localhost.example.com:80", false},
		{"127.0.0.1", false}, // no port: not an address
		{"", false},
	} {
		if got := IsLoopback(tc.addr); got != tc.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestCheckIssuerURL(t *testing.T) {
	for _, tc := range []struct {
		issuer string
		want   string // "" passes; else a fragment of the refusal
	}{
		{"https://accounts.example.com", ""},
		{"https://idp.example.com/realms/cast", ""},
		{"http://127.0.0.1:5556/dex", ""},
		{"http://localhost:8080", ""},
		{"http://[::1]:8080", ""},
		{"http://accounts.example.com", "must be https (http only on loopback)"},
		{"ftp://127.0.0.1", "must be https"},
		{"accounts.example.com", "must be an https URL"},
		{"https://accounts.example.com?x=1", "must be an https URL"},
		{"https://accounts.example.com#frag", "must be an https URL"},
		{"https://user@accounts.example.com", "must be an https URL"},
		{"", "must be an https URL"},
	} {
		err := CheckIssuerURL(tc.issuer)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckIssuerURL(%q) = %v, want nil", tc.issuer, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckIssuerURL(%q) = %v, want an error with %q", tc.issuer, err, tc.want)
		}
	}
}
