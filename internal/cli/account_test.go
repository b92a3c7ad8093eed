package cli

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func TestAccountColumns(t *testing.T) {
	future, past := timestamppb.New(time.Now().Add(time.Hour)), timestamppb.New(time.Now().Add(-time.Hour))
	for _, tc := range []struct {
		acc          *castv1.Account
		usage, until string
	}{
		{&castv1.Account{}, "-", "-"},
		{&castv1.Account{Usage: []*castv1.UsageWindow{{Name: "five_hour", UsedPercent: 96.4, ResetTime: future}, {Name: "seven_day", UsedPercent: 40}}},
			"five_hour 96%, seven_day 40%", "-"},
		{&castv1.Account{Usage: []*castv1.UsageWindow{{Name: "primary", UsedPercent: 99, ResetTime: past}}, LimitedUntil: past}, "-", "-"},
		{&castv1.Account{LimitedUntil: future}, "-", future.AsTime().Local().Format(time.RFC3339)},
	} {
		if got := usage(tc.acc); got != tc.usage {
			t.Errorf("usage = %q, want %q", got, tc.usage)
		}
		if got := limitedUntil(tc.acc); got != tc.until {
			t.Errorf("limitedUntil = %q, want %q", got, tc.until)
		}
	}
}
