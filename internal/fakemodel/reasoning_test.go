package fakemodel

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// postAs is a non-streaming Responses call with credential tok.
func postAs(t *testing.T, s *Server, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Reasoning is sealed to the credential that asked: the same credential
// may send it back, another gets 400; off, nothing is sealed or checked.
func TestEncryptedReasoningIsBoundToItsCredential(t *testing.T) {
	s := Start(t)
	s.SetEncryptedReasoning(true)
	status, out := postAs(t, s, "tok-a", `{"model":"m","input":"hi"}`)
	if status != 200 || !strings.Contains(out, SealOf("tok-a")) || !strings.Contains(out, ThoughtSummary(1)) || strings.Contains(out, "tok-a") {
		t.Fatalf("first answer (%d): %s", status, out)
	}
	back := `{"model":"m","input":[{"type":"reasoning","summary":[],"encrypted_content":"` + SealOf("tok-a") + `1"},{"type":"message","role":"user","content":"again"}]}`
	for _, tc := range []struct {
		tok  string
		want int
	}{
		{"tok-a", 200},
		{"tok-b", 400},
	} {
		if status, out := postAs(t, s, tc.tok, back); status != tc.want {
			t.Errorf("%s sending A's reasoning: %d %s, want %d", tc.tok, status, out, tc.want)
		}
	}
	noEnc := `{"model":"m","input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"x"}]},{"type":"message","role":"user","content":"again"}]}`
	if status, out := postAs(t, s, "tok-b", noEnc); status != 200 {
		t.Errorf("reasoning without encrypted_content refused: %d %s", status, out)
	}
	s.SetEncryptedReasoning(false)
	if status, out := postAs(t, s, "tok-b", back); status != 200 || strings.Contains(out, sealPrefix) {
		t.Errorf("off: %d %s", status, out)
	}
}
