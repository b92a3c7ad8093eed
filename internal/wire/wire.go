// Package wire converts between the neutral transcript model and its
// cast.v1 protobuf form, for the CLI, the node and the control plane.
package wire

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
)

// kinds maps neutral kinds to proto kinds; the enums line up by design,
// but an explicit table keeps either side free to grow.
var kinds = map[transcript.Kind]castv1.MessageKind{
	transcript.KindUser:       castv1.MessageKind_MESSAGE_KIND_USER,
	transcript.KindAssistant:  castv1.MessageKind_MESSAGE_KIND_ASSISTANT,
	transcript.KindThinking:   castv1.MessageKind_MESSAGE_KIND_THINKING,
	transcript.KindToolCall:   castv1.MessageKind_MESSAGE_KIND_TOOL_CALL,
	transcript.KindToolResult: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT,
	transcript.KindNotice:     castv1.MessageKind_MESSAGE_KIND_NOTICE,
	transcript.KindInternal:   castv1.MessageKind_MESSAGE_KIND_INTERNAL,
}

// ToProto converts a neutral message.
func ToProto(m transcript.Message) *castv1.Message {
	p := &castv1.Message{
		Seq: m.Seq, ClientId: m.ClientID, Kind: kinds[m.Kind], Text: m.Text, NoticeType: m.NoticeType,
		Agent: m.Agent, Model: m.Model, Account: m.Account, NativeId: m.NativeID,
	}
	if !m.Time.IsZero() {
		p.CreateTime = timestamppb.New(m.Time)
	}
	if c := m.ToolCall; c != nil {
		p.ToolCall = &castv1.ToolCall{Id: c.ID, Name: c.Name, Input: c.Input}
	}
	if r := m.ToolResult; r != nil {
		p.ToolResult = &castv1.ToolResult{CallId: r.CallID, Output: r.Output, IsError: r.IsError}
		if r.ExitCode != nil {
			p.ToolResult.HasExitCode, p.ToolResult.ExitCode = true, *r.ExitCode
		}
	}
	for _, im := range m.Images {
		p.Images = append(p.Images, &castv1.Image{MediaType: im.MediaType, Data: im.Data})
	}
	return p
}

// FromProto converts a stored message.
func FromProto(p *castv1.Message) transcript.Message {
	m := transcript.Message{
		Seq: p.Seq, ClientID: p.ClientId, Text: p.Text, NoticeType: p.NoticeType,
		Agent: p.Agent, Model: p.Model, Account: p.Account, NativeID: p.NativeId,
	}
	for k, v := range kinds {
		if v == p.Kind {
			m.Kind = k
		}
	}
	if p.CreateTime != nil {
		m.Time = p.CreateTime.AsTime()
	}
	if c := p.ToolCall; c != nil {
		m.ToolCall = &transcript.ToolCall{ID: c.Id, Name: c.Name, Input: c.Input}
	}
	if r := p.ToolResult; r != nil {
		m.ToolResult = &transcript.ToolResult{CallID: r.CallId, Output: r.Output, IsError: r.IsError}
		if r.HasExitCode {
			code := r.ExitCode
			m.ToolResult.ExitCode = &code
		}
	}
	for _, im := range p.Images {
		m.Images = append(m.Images, transcript.Image{MediaType: im.MediaType, Data: im.Data})
	}
	return m
}

// Validate checks a proto message the way the neutral model does.
func Validate(p *castv1.Message) error {
	m := FromProto(p)
	return m.Validate()
}
