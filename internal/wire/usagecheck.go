package wire

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// MaxUsageWindows bounds one usage report; providers report two today.
const MaxUsageWindows = 8

// MaxUsedPercent admits providers that report a window past its limit
// (Claude's utilization goes over 1.0); what matters is a finite number.
const MaxUsedPercent = 1000

// CheckWindows is the control plane's rule for the usage windows of a turn
// report, the first refusal or nil. The node applies it before sending
// (ReportableWindows): a report it refuses is refused at every retry.
func CheckWindows(usage []*castv1.UsageWindow) error {
	if len(usage) > MaxUsageWindows {
		return errs.Invalid("%d usage windows; at most %d", len(usage), MaxUsageWindows)
	}
	for i, w := range usage {
		if err := checkWindow(fmt.Sprintf("usage[%d].", i), w); err != nil {
			return err
		}
	}
	return nil
}

func checkWindow(prefix string, w *castv1.UsageWindow) error {
	for _, err := range []error{
		validate.Need(validate.Name, prefix+"name", w.Name),
		validate.Check(validate.Name, prefix+"model", w.Model),
		validate.Percent(prefix+"used_percent", w.UsedPercent, MaxUsedPercent),
		validate.Range(prefix+"window_minutes", int64(w.WindowMinutes), 0, 366*24*60),
	} {
		if err != nil {
			return err
		}
	}
	for name, ts := range map[string]*timestamppb.Timestamp{"resets_at": w.ResetsAt, "reset_time": w.ResetTime} {
		if ts == nil {
			continue
		}
		if err := ts.CheckValid(); err != nil {
			return errs.Invalid("%s is not a valid timestamp: %v", prefix+name, err)
		}
	}
	return nil
}

// ReportableWindows is ws for the wire without the windows CheckWindows
// would refuse (a CLI whose output changed: a reset time in milliseconds
// read as seconds, a percentage that is not one), and how many it left
// out: the turn's report must land whatever a CLI printed.
func ReportableWindows(ws []*castv1.UsageWindow) ([]*castv1.UsageWindow, int) {
	var out []*castv1.UsageWindow
	for _, w := range ws {
		if len(out) < MaxUsageWindows && checkWindow("", w) == nil {
			out = append(out, w)
		}
	}
	return out, len(ws) - len(out)
}
