package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Example lines of commands that do not set their own,
// by command path without "cast". Kept together so they read as one page
// of usage and stay in one style; TestEveryCommandHasExamples fails on a
// command without examples and on an entry naming no command.
var examples = map[string][]string{
	"":                       {"cast new --agent claude \"fix the flaky test\"", "cast ls", "cast read 7k2m9qa"},
	"account":                {"cast account ls", "cast account add work --agent claude --credentials ~/.claude/.credentials.json"},
	"account add":            {"cast account add work --agent claude --credentials ~/.claude/.credentials.json", "cast account add team --agent codex --from-home ~/.codex --release-home", "cat auth.json | cast account add ci --agent codex --credentials -"},
	"account approve":        {"cast account approve --agent claude"},
	"account deny":           {"cast account deny --agent claude"},
	"account ls":             {"cast account ls", "cast account ls --agent codex -o wide", "cast account ls -o json"},
	"account policy":         {"cast account policy work auto --agent claude", "cast account policy personal fleet --agent claude"},
	"account rm":             {"cast account rm old --agent claude"},
	"account use":            {"cast account use team --agent claude"},
	"agents":                 {"cast agents", "cast agents -o wide", "cast agents -o json"},
	"agents check":           {"cast agents check", "cast agents check --agent codex"},
	"approve":                {"cast approve 7k2m9qa", "cast approve 7k2m9qa --request r1"},
	"ca":                     {"cast ca --ca-pin sha256:3f1c... > ca.pem", "cast ca status"},
	"ca activate":            {"cast ca activate"},
	"ca bundle":              {"cast ca bundle > trust.pem"},
	"ca retire":              {"cast ca retire"},
	"ca rotate":              {"cast ca rotate", "cast ca rotate --cert new-ca.crt --key new-ca.key"},
	"ca status":              {"cast ca status", "cast ca status --json"},
	"completion":             {"cast completion bash > ~/.local/share/bash-completion/completions/cast", "cast completion zsh > \"${fpath[1]}/_cast\""},
	"completion bash":        {"cast completion bash > ~/.local/share/bash-completion/completions/cast"},
	"completion fish":        {"cast completion fish > ~/.config/fish/completions/cast.fish"},
	"completion powershell":  {"cast completion powershell | Out-String | Invoke-Expression"},
	"completion zsh":         {"cast completion zsh > \"${fpath[1]}/_cast\""},
	"config":                 {"cast config get-contexts", "cast config use-context work"},
	"config current-context": {"cast config current-context"},
	"config get-contexts":    {"cast config get-contexts", "cast config get-contexts -o wide", "cast config get-contexts -o name"},
	"config set-context":     {"cast config set-context work --addr cast.example.com:7777 --ca ~/work-ca.pem --token-file ~/.work-token", "cast config set-context work --token-command \"my-oidc-helper get-token\"", "cast config set-context dev --node mybox"},
	"config use-context":     {"cast config use-context work"},
	"deny":                   {"cast deny 7k2m9qa -m \"do not touch prod\""},
	"diff":                   {"cast diff 7k2m9qa", "cast diff 7k2m9qa --json"},
	"exec":                   {"cast exec --agent codex \"summarise README.md\"", "cast exec --dry-run \"what would run?\"", "cast exec -j 3 \"lint a\" \"lint b\" \"lint c\""},
	"restore":                {"cast restore 7k2m9qa", "cast ls --origin native && cast restore 7k2m9qa --cwd ~/src/app"},
	"export":                 {"cast export 7k2m9qa --agent codex --home ~/.codex", "cast export 7k2m9qa --agent claude --home ~/.claude --cwd ~/src/app"},
	"fork":                   {"cast fork 7k2m9qa", "cast fork 7k2m9qa --at 12 --agent codex", "cast fork 7k2m9qa --worktree try-b"},
	"get":                    {"cast get 7k2m9qa", "cast get 7k2m9qa -o yaml", "cast get 7k2m9qa --json"},
	"handoff":                {"cast handoff 7k2m9qa --agent codex", "cast handoff 7k2m9qa --agent same --account work", "cast handoff 7k2m9qa --agent claude --dry-run"},
	"import":                 {"cast import --agent claude ~/.claude/projects/-home-me-app/0a1b2c.jsonl", "opencode export ses_123 > s.json && cast import --agent opencode s.json", "cast import --agent claude --parent 7k2m9qa ~/.claude/projects/-home-me-app/0a1b2c/subagents/agent-a1b2.jsonl"},
	"interrupt":              {"cast interrupt 7k2m9qa"},
	"login":                  {"cast login --context work --issuer https://accounts.example.com --client-id cast", "cast login", "cast login --grant-type authcode"},
	"ls":                     {"cast ls", "cast ls --agent claude --state idle", "cast ls --all -o wide", "cast ls -o name --node laptop", "cast ls --origin native"},
	"mcp":                    {"cast mcp --tools history"},
	"mcp call":               {"cast mcp call history '{\"thread_id\":\"7k2m9qa\",\"limit\":20}'"},
	"merge":                  {"cast merge 9x8w7v6", "cast merge 9x8w7v6 \"review what the fork did\"", "cast merge 9x8w7v6 --run"},
	"migrate":                {"cast migrate start --to linux 7k2m9qa", "cast migrate ls"},
	"migrate cancel":         {"cast migrate cancel MIGRATION_ID"},
	"migrate ls":             {"cast migrate ls", "cast migrate ls -o json"},
	"migrate status":         {"cast migrate status", "cast migrate status MIGRATION_ID --follow"},
	"new":                    {"cast new --agent claude \"fix the flaky test\"", "cast new --agent codex --cwd ~/src/app --worktree fix-42 \"fix issue 42\"", "echo \"explain main.go\" | cast new --agent gemini -"},
	"node":                   {"cast node ls", "cast node token create --ttl 1h"},
	"node join":              {"cast node join --join-token TOKEN --ca-pin sha256:3f1c... --name build1"},
	"node ls":                {"cast node ls", "cast node ls -o wide", "cast node ls -o name --no-headers"},
	"node revoke":            {"cast node revoke build1"},
	"node rm":                {"cast node rm old-laptop", "cast node rm old-laptop --force"},
	"node token":             {"cast node token create"},
	"node token create":      {"cast node token create", "cast node token create --ttl 24h --uses 5"},
	"nodes":                  {"cast nodes", "cast nodes --json"},
	"read":                   {"cast read 7k2m9qa", "cast read 7k2m9qa 87:106", "cast read 7k2m9qa --json"},
	"rm":                     {"cast rm 7k2m9qa", "cast rm 7k2m9qa --purge"},
	"send":                   {"cast send 7k2m9qa \"now add a test\"", "git diff | cast send 7k2m9qa -"},
	"spawn":                  {"cast spawn --subagent --agent codex --parent 7k2m9qa \"write the migration\""},
	"switch":                 {"cast switch 7k2m9qa --agent codex", "cast switch 7k2m9qa --model opus --effort high", "cast switch 7k2m9qa --agent gemini --fork"},
	"token":                  {"cast token ls", "cast token create --role user --name alice"},
	"token cert":             {"cast token cert", "cast token cert --out alice.pem"},
	"token create":           {"cast token create --role user --name alice", "cast token create --role admin --name ops"},
	"token ls":               {"cast token ls", "cast token ls -o name"},
	"token rm":               {"cast token rm alice"},
	"token whoami":           {"cast token whoami"},
	"web":                    {"cast web", "cast web --print   # just print the one-time link (it works once, within a minute)"},
	"usage":                  {"cast usage", "cast usage --agent claude -o json"},
	"version":                {"cast version", "cast version --client", "cast version -o yaml"},
	"watch":                  {"cast watch 7k2m9qa", "cast watch 7k2m9qa --from-seq 40"},
	"workspace":              {"cast workspace set 7k2m9qa --worktree fix-42"},
	"workspace set":          {"cast workspace set 7k2m9qa --root", "cast workspace set 7k2m9qa --repo services/api", "cast workspace set 7k2m9qa --worktree fix-42 --base main"},
	"worktree":               {"cast worktree ls", "cast worktree rm PATH"},
	"worktree ls":            {"cast worktree ls", "cast worktree ls --node laptop -o wide"},
	"worktree rm":            {"cast worktree rm \"$(cast worktree ls -o name | head -1)\"", "cast worktree rm PATH --force --node laptop"},
}

// addExamples sets the Example of every command under root from
// examples, leaving one a command set itself.
func addExamples(root *cobra.Command) {
	for _, sub := range root.Commands() {
		addExamples(sub)
	}
	if root.Example != "" {
		return
	}
	if lines := examples[commandKey(root)]; len(lines) > 0 {
		root.Example = "  " + strings.Join(lines, "\n  ")
	}
}

// commandKey is a command's path without the root's name.
func commandKey(c *cobra.Command) string {
	path := c.CommandPath()
	if i := strings.IndexByte(path, ' '); i >= 0 {
		return path[i+1:]
	}
	return ""
}
