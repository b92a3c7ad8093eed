package wire

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/quota"
)

// WindowsToProto converts usage windows for the wire (nil for none).
func WindowsToProto(ws []quota.Window) []*castv1.UsageWindow {
	if len(ws) == 0 {
		return nil
	}
	out := make([]*castv1.UsageWindow, 0, len(ws))
	for _, w := range ws {
		p := &castv1.UsageWindow{Name: w.Name, UsedPercent: w.UsedPercent, WindowMinutes: int32(w.WindowMinutes), Model: w.Model}
		if !w.ResetsAt.IsZero() {
			p.ResetsAt = timestamppb.New(w.ResetsAt)
		}
		out = append(out, p)
	}
	return out
}

// WindowsFromProto converts usage windows from the wire (nil for none).
func WindowsFromProto(ws []*castv1.UsageWindow) []quota.Window {
	if len(ws) == 0 {
		return nil
	}
	out := make([]quota.Window, 0, len(ws))
	for _, p := range ws {
		w := quota.Window{Name: p.Name, UsedPercent: p.UsedPercent, WindowMinutes: int(p.WindowMinutes), Model: p.Model}
		if p.ResetsAt != nil {
			w.ResetsAt = p.ResetsAt.AsTime().UTC()
		}
		out = append(out, w)
	}
	return out
}
