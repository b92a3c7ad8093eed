package agenttest

import "path/filepath"

// IndexFile is a file where an agent's CLI lists the folders it ran in,
// with a user's own index as the CLI writes it, listing /home/me/app.
type IndexFile struct {
	Path, Mine string
}

// IndexFiles are agent's index files for a turn with home (HOME) and
// agentDir (its own folder): Claude's .claude.json (in CLAUDE_CONFIG_DIR,
// else in HOME), Gemini's projects.json; none for the others.
func IndexFiles(agent, home, agentDir string) []IndexFile {
	claude := `{"projects": {"/home/me/app": {"allowedTools": []}}, "userID": "u"}`
	return map[string][]IndexFile{
		"claude": {{filepath.Join(agentDir, ".claude.json"), claude}, {filepath.Join(home, ".claude.json"), claude}},
		"gemini": {{filepath.Join(agentDir, "projects.json"), "{\n  \"projects\": {\n    \"/home/me/app\": \"app\"\n  }\n}"}},
	}[agent]
}
