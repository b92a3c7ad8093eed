package web_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/testharness"
)

// connectError is the JSON of a Connect error.
type connectError struct {
	Code    string
	Message string
	Details []struct{ Type, Value string }
}

func (e connectError) reason() string {
	for _, d := range e.Details {
		var info errdetails.ErrorInfo
		b, _ := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if d.Type == "google.rpc.ErrorInfo" && proto.Unmarshal(b, &info) == nil {
			return info.Reason
		}
	}
	return ""
}

// answerOf reads an answer in the protocol it came in: a gRPC-Web status
// (in the headers or the body's trailer frame), a Connect stream's end
// message, or a Connect unary answer (any other); it returns the code, as
// Connect spells it ("ok" for a success), and the ErrorInfo reason.
func answerOf(t *testing.T, resp *http.Response) (string, string) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc-web"):
		hdr := resp.Header
		if hdr.Get("Grpc-Status") == "" { // the trailers frame: flag 0x80
			hdr = http.Header{}
			for len(body) >= 5 {
				n := binary.BigEndian.Uint32(body[1:5])
				if body[0]&0x80 != 0 {
					for _, line := range strings.Split(string(body[5:5+n]), "\r\n") {
						if k, v, ok := strings.Cut(line, ":"); ok {
							hdr.Set(strings.TrimSpace(k), strings.TrimSpace(v))
						}
					}
				}
				body = body[5+n:]
			}
		}
		c, _ := strconv.Atoi(hdr.Get("Grpc-Status"))
		reason := ""
		if raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(hdr.Get("Grpc-Status-Details-Bin"), "=")); err == nil {
			var st spb.Status
			if proto.Unmarshal(raw, &st) == nil {
				for _, d := range st.Details {
					var info errdetails.ErrorInfo
					if d.UnmarshalTo(&info) == nil {
						reason = info.Reason
					}
				}
			}
		}
		return connectName(codes.Code(c).String()), reason
	case strings.HasPrefix(ct, "application/connect+"):
		for len(body) >= 5 {
			n := binary.BigEndian.Uint32(body[1:5])
			if body[0]&0x02 != 0 {
				var end struct{ Error *connectError }
				if json.Unmarshal(body[5:5+n], &end) != nil || end.Error == nil {
					return "ok", ""
				}
				return end.Error.Code, end.Error.reason()
			}
			body = body[5+n:]
		}
		t.Fatalf("a Connect stream without its end message: %q", body)
	}
	if resp.StatusCode == http.StatusOK {
		return "ok", ""
	}
	var e connectError
	if err := json.Unmarshal(body, &e); err != nil {
		return "HTTP " + strconv.Itoa(resp.StatusCode) + " " + strings.TrimSpace(string(body)), ""
	}
	return e.Code, e.reason()
}

func envelope(flag byte, msg string) string {
	var b bytes.Buffer
	b.WriteByte(flag)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(msg)))
	b.WriteString(msg)
	return b.String()
}

// Every refusal on the web listener's API carries an ErrorInfo reason, as
// the gRPC API's do, in the protocol the request came in: a body that does
// not decode (Connect JSON, Connect proto, gRPC-Web; unary and a stream),
// a Content-Type that is no RPC, an unknown method, a GET, a cross-site
// call. A malformed JSON body was "unknown" (500) with no reason, a
// Content-Type or method the transcoder does not serve a plain-text 404 or
// 415, the handler's own refusals plain text. A field the request message
// does not have is accepted, as the gRPC API accepts it (a newer app on an
// older replica during a roll).
func TestWebRefusalsCarryAReason(t *testing.T) {
	srv, auth := startWeb(t)
	base := srv.WebURL()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	testharness.OpenLoginLink(t, browser, loginLink(t, auth)).Body.Close()
	const list = "SessionService/ListSessions"
	for _, r := range []struct {
		name, method, path, ctype, origin, body string
		code, reason                            string
	}{
		{"malformed JSON", "POST", list, "application/json", "", `{`, "invalid_argument", "INVALID_ARGUMENT"},
		{"a string for an int32", "POST", list, "application/json", "", `{"pageSize":"x"}`, "invalid_argument", "INVALID_ARGUMENT"},
		{"an unknown field", "POST", list, "application/json", "", `{"bogus":1}`, "ok", ""},
		{"malformed proto", "POST", list, "application/proto", "", "\x0a\x10a", "invalid_argument", "INVALID_ARGUMENT"},
		{"malformed gRPC-Web", "POST", list, "application/grpc-web+proto", "", envelope(0, "\x0a\x10a"), "invalid_argument", "INVALID_ARGUMENT"},
		{"malformed JSON on a stream", "POST", "SessionService/WatchSession", "application/connect+json", "", envelope(0, `{`), "invalid_argument", "INVALID_ARGUMENT"},
		{"text/plain", "POST", list, "text/plain", "", `{}`, "invalid_argument", "INVALID_ARGUMENT"},
		{"no Content-Type", "POST", list, "", "", `{}`, "invalid_argument", "INVALID_ARGUMENT"},
		{"an unknown codec", "POST", list, "application/xml", "", `<a/>`, "invalid_argument", "INVALID_ARGUMENT"},
		{"an unknown method", "POST", "SessionService/Nope", "application/json", "", `{}`, "unimplemented", "UNKNOWN_METHOD"},
		{"an unknown service", "POST", "NopeService/Nope", "application/json", "", `{}`, "unimplemented", "UNKNOWN_METHOD"},
		{"GET", "GET", list + "?encoding=json&message=%7B%7D&connect=v1", "", "", "", "invalid_argument", "INVALID_ARGUMENT"},
		{"another site", "POST", list, "application/json", "https://evil.test", `{}`, "permission_denied", "PERMISSION_DENIED"},
		{"another site, gRPC-Web", "POST", list, "application/grpc-web+proto", "https://evil.test", envelope(0, ""), "permission_denied", "PERMISSION_DENIED"},
	} {
		req, err := http.NewRequest(r.method, base+"/cast.v1."+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.ctype != "" {
			req.Header.Set("Content-Type", r.ctype)
		}
		if strings.HasPrefix(r.ctype, "application/json") || strings.HasPrefix(r.ctype, "application/proto") {
			req.Header.Set("Connect-Protocol-Version", "1")
		}
		if r.origin != "" {
			req.Header.Set("Origin", r.origin)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		code, reason := answerOf(t, resp)
		resp.Body.Close()
		if code != r.code || reason != r.reason {
			t.Errorf("%s: %s (reason %q), want %s %s", r.name, code, reason, r.code, r.reason)
		}
	}
}
