package gemini

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
)

func init() { agents.RegisterLoginCheck("gemini", findLogin) }

// findLogin is what headless gemini (0.61, validateNonInteractiveAuth)
// accepts: the auth type settings.json selects, else the one its
// environment implies, and for that type its key or login. The
// environment is completed the way gemini completes its own at start:
// from the first .env file it finds (envFile), a variable already set
// winning. Only the home end of gemini's search is looked at (the node
// checks no session's folder), and a key gemini keeps in the system
// keychain is not seen.
func findLogin(_ agents.Login, dir string, env []string) (string, bool) {
	s := readSettings(dir)
	vars, file := envFile(filepath.Dir(dir), trusted(s, env))
	get := func(k string) (string, string) {
		if v := agents.EnvValue(env, k); v != "" {
			return v, "its environment"
		}
		return vars[k], file
	}
	typ, from := s.Security.Auth.SelectedType, "settings.json selects"
	if typ == "" {
		typ, from = typeFromEnv(get), "its environment implies"
	}
	switch typ {
	case "":
		return "no auth method: settings.json selects none and no GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI or GOOGLE_GENAI_USE_GCA is set in its environment or " + orNone(file), false
	case "oauth-personal":
		creds := filepath.Join(dir, "oauth_creds.json")
		if fi, err := os.Stat(creds); err == nil && fi.Mode().IsRegular() {
			return "logged in (" + creds + ")", true
		}
		return from + " a Google login, but " + creds + " is missing", false
	case "compute-default-credentials":
		return "compute default credentials (" + from + " them)", true
	case "gemini-api-key":
		if v, where := get("GEMINI_API_KEY"); v != "" {
			return "key in " + where + " (GEMINI_API_KEY)", true
		}
		return from + " a Gemini API key, but GEMINI_API_KEY is not set in its environment or " + orNone(file), false
	case "vertex-ai":
		if v, where := get("GOOGLE_API_KEY"); v != "" {
			return "key in " + where + " (GOOGLE_API_KEY, Vertex AI)", true
		}
		p, where := get("GOOGLE_CLOUD_PROJECT")
		if l, _ := get("GOOGLE_CLOUD_LOCATION"); p != "" && l != "" {
			return "Vertex AI project in " + where + " (GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION)", true
		}
		return from + " Vertex AI, but neither GOOGLE_API_KEY nor GOOGLE_CLOUD_PROJECT with GOOGLE_CLOUD_LOCATION is set", false
	}
	return from + " auth type " + typ + ", which gemini does not accept headless", false
}

func orNone(file string) string {
	if file == "" {
		return "a .env file (there is none)"
	}
	return file
}

// typeFromEnv is gemini's getAuthTypeFromEnv, in its order.
func typeFromEnv(get func(string) (string, string)) string {
	v := func(k string) string { s, _ := get(k); return s }
	switch {
	case v("GOOGLE_GENAI_USE_GCA") == "true":
		return "oauth-personal"
	case v("GOOGLE_GENAI_USE_VERTEXAI") == "true":
		return "vertex-ai"
	case v("GOOGLE_GEMINI_BASE_URL") != "":
		return "gateway"
	case v("GEMINI_API_KEY") != "":
		return "gemini-api-key"
	case v("CLOUD_SHELL") == "true" || v("GEMINI_CLI_USE_COMPUTE_ADC") == "true":
		return "compute-default-credentials"
	}
	return ""
}

type settings struct {
	Security struct {
		Auth struct {
			SelectedType string `json:"selectedType"`
		} `json:"auth"`
		FolderTrust struct {
			Enabled *bool `json:"enabled"`
		} `json:"folderTrust"`
	} `json:"security"`
}

// readSettings reads the user's settings.json (zero when missing or not
// JSON; gemini itself would refuse a broken one).
func readSettings(dir string) settings {
	var s settings
	agents.ReadJSON(filepath.Join(dir, "settings.json"), &s)
	return s
}

// trusted is gemini's checkPathTrust as it answers for a folder never
// marked trusted: the environment decides first; with folder trust on
// (its default) the folder is not trusted.
func trusted(s settings, env []string) bool {
	switch {
	case agents.EnvValue(env, "GEMINI_RESTRICTED_MODE") == "true", agents.EnvValue(env, "GEMINI_CLI_TRUST_WORKSPACE") == "false":
		return false
	case agents.EnvValue(env, "GEMINI_CLI_TRUST_WORKSPACE") == "true":
		return true
	}
	return s.Security.FolderTrust.Enabled != nil && !*s.Security.FolderTrust.Enabled
}

// untrustedVars are the only variables gemini takes from a .env file in
// a folder it does not trust.
var untrustedVars = map[string]bool{"GEMINI_API_KEY": true, "GOOGLE_API_KEY": true, "GOOGLE_CLOUD_PROJECT": true, "GOOGLE_CLOUD_LOCATION": true}

// envFile reads the .env file gemini reads at the top of its search
// (findEnvFile): in a trusted folder home/.gemini/.env, else (or when
// there is none) home/.env. Only the first file found is read, even when
// it holds no key.
func envFile(home string, trust bool) (map[string]string, string) {
	var candidates []string
	if trust {
		candidates = append(candidates, filepath.Join(home, ".gemini", ".env"))
	}
	for _, p := range append(candidates, filepath.Join(home, ".env")) {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		vars := parseDotenv(string(b))
		if !trust {
			for k := range vars {
				if !untrustedVars[k] {
					delete(vars, k)
				}
			}
		}
		return vars, p
	}
	return nil, ""
}

// parseDotenv reads KEY=VALUE lines as the dotenv package does: an
// optional `export `, KEY: VALUE too, quotes around a value taken off, an
// unquoted value ending at #.
func parseDotenv(s string) map[string]string {
	vars := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		line = strings.TrimSpace(strings.TrimPrefix(line, "export "))
		k, v, ok := strings.Cut(line, "=")
		if i := strings.Index(line, ": "); i >= 0 && (!ok || i < len(k)) {
			k, v, ok = line[:i], line[i+2:], true
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool {
			return !(r == '_' || r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) {
			continue
		}
		if n := len(v); n >= 2 && strings.ContainsRune(`'"`+"`", rune(v[0])) && v[n-1] == v[0] {
			v = v[1 : n-1]
		} else if i := strings.IndexByte(v, '#'); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		vars[k] = v
	}
	return vars
}
