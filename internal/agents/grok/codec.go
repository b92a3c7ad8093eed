package grok

import "github.com/cast-dev/cast/internal/agents"

func init() { agents.RegisterCodec("grok", agents.FileCodec(Reader{}, Writer{})) }
