package agents

// CwdIndex is a Driver whose CLI also records each working directory in
// an index file of its own (Gemini's projects.json), which a run in a
// scratch folder leaves pointing at a folder that is gone.
// ForgetCwd removes exactly cwd's entry, nothing else of the file.
type CwdIndex interface {
	ForgetCwd(home, cwd string) error
}
