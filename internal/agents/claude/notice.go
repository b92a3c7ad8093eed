package claude

import "github.com/cast-dev/cast/internal/agents/kit"

// Notices and the trimming note are written as isMeta user records: Claude
// Code sends them to the model but hides them in its UI, so they are
// context rather than something the user appears to have typed. The tag lets
// the reader tell them from the CLI's own meta records.
const noticeTag kit.NoticeTag = "cast-notice"

// omittedType marks the trimming note; it is not a neutral notice and is
// not read back (the neutral copy still has the omitted messages).
const omittedType = "omitted"
