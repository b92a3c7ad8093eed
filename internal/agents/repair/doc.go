// Package repair holds pure transcript repairs shared by the agent codecs:
// fixes a transcript needs before a writer can render it for an agent. It
// does no I/O.
package repair
