package custody

import "github.com/cast-dev/cast/internal/errs"

// Only nodes an admin marks may hold fleet logins: a custodian reads the
// whole credential, refresh token included, so any joined machine (a
// laptop) electing itself would carry every fleet login away. The mark is
// an admin label (`cast node label NODE cast.dev/custodian=true`), which a
// node cannot set on itself.
const (
	// MarkLabel is the admin label's key, MarkValue its value.
	MarkLabel = "cast.dev/custodian"
	MarkValue = "true"
	// ReasonNotMarked: the node lacks the mark, so it may not be elected
	// custodian nor read a refresh token.
	ReasonNotMarked = "NODE_NOT_CUSTODIAN"
)

// Marked says whether a node's admin labels let it hold fleet logins.
func Marked(labels map[string]string) bool { return labels[MarkLabel] == MarkValue }

// NotMarked is the refusal of custody to node, saying what to do.
func NotMarked(node string) *errs.Error {
	return errs.New(errs.KindPermissionDenied, ReasonNotMarked,
		"node %s may not hold fleet logins: it lacks the admin label %s=%s; an admin marks a custodian with `cast node label %s %s=%s`",
		node, MarkLabel, MarkValue, node, MarkLabel, MarkValue).With("node", node)
}
