// Package adopt is a node's adoption of native sessions: it watches the
// folders where each agent keeps its own sessions (the drivers name them:
// agents.SessionLister), or the store of its own an agent keeps them in
// (OpenCode's database: agents.StoreLister), and keeps every session found
// there, including those the user ran in the agent directly, as a cast
// session through a Sink (the node sends it to the control plane's
// AdoptSession). A file is imported once, then followed as it grows: by
// offset and content hash, parsing only the appended lines where the
// driver can (TailParser); a file read whole goes through a snapshot a
// message at a time where its reader can (StreamReader), sent as read; a
// file rewritten or cut short is read again and only messages not kept
// before are sent, unless its format now names another native session,
// adopted then as one of its own, or its every message is newer than those
// read (its CLI began it again after it was deleted), all new then. Every
// message carries a client id derived from its content and occurrence, so
// a resend is stored once. Files cast runs or wrote itself (Cast) are
// never adopted as new sessions.
package adopt
