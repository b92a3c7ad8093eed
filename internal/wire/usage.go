package wire

import (
	"time"

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
			// Both: resets_at for readers older than reset_time (AIP-142).
			p.ResetsAt, p.ResetTime = timestamppb.New(w.ResetsAt), timestamppb.New(w.ResetsAt)
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
		if t := ResetTime(p); t != nil {
			w.ResetsAt = t.AsTime().UTC()
		}
		out = append(out, w)
	}
	return out
}

// LimitEndTime is when the usage limit an account is over ends:
// limit_end_time, or the deprecated limited_until an older control plane
// sends; nil when it is over none.
func LimitEndTime(a *castv1.Account) *timestamppb.Timestamp {
	if a.GetLimitEndTime() != nil {
		return a.GetLimitEndTime()
	}
	return a.GetLimitedUntil()
}

// ChoiceTimes are when a pending choice's limit ends and when it was first
// asked: the *_time fields, or the deprecated until and since an older
// control plane sends.
func ChoiceTimes(c *castv1.AccountChoice) (limitEnd, created time.Time) {
	limitEnd, created = c.GetLimitEndTime().AsTime(), c.GetCreateTime().AsTime()
	if c.GetLimitEndTime() == nil {
		limitEnd = c.GetUntil().AsTime()
	}
	if c.GetCreateTime() == nil {
		created = c.GetSince().AsTime()
	}
	return limitEnd, created
}

// ResetTime is when a window resets: reset_time, or the deprecated
// resets_at an older node sends; nil when unknown.
func ResetTime(p *castv1.UsageWindow) *timestamppb.Timestamp {
	if p.GetResetTime() != nil {
		return p.GetResetTime()
	}
	return p.GetResetsAt()
}
