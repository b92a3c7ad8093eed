package controlplane

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Every point in time the API carries is a Timestamp named *_time
// (AIP-142): a field of another style may stay only deprecated, beside
// its *_time replacement, until it goes.
func TestTimeFieldsAreTimestampsNamedTime(t *testing.T) {
	var checked int
	protoregistry.GlobalFiles.RangeFilesByPackage("cast.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Messages().Len() {
			checked += checkTimeFields(t, fd.Messages().Get(i))
		}
		return true
	})
	if checked == 0 {
		t.Fatal("no Timestamp field found in cast.v1: the walk is broken")
	}
}

func checkTimeFields(t *testing.T, md protoreflect.MessageDescriptor) (timestamps int) {
	t.Helper()
	for i := range md.Messages().Len() {
		timestamps += checkTimeFields(t, md.Messages().Get(i))
	}
	for i := range md.Fields().Len() {
		f := md.Fields().Get(i)
		name := string(f.Name())
		deprecated := f.Options().(*descriptorpb.FieldOptions).GetDeprecated()
		isTimestamp := f.Message() != nil && f.Message().FullName() == "google.protobuf.Timestamp"
		if isTimestamp {
			timestamps++
		}
		switch {
		case deprecated:
		case isTimestamp && !strings.HasSuffix(name, "_time"):
			t.Errorf("%s: a Timestamp named other than *_time", f.FullName())
		case strings.HasSuffix(name, "_unix") || strings.HasSuffix(name, "_at"):
			t.Errorf("%s: a point in time not carried as a Timestamp named *_time", f.FullName())
		}
	}
	return timestamps
}

// A refresh's issue time comes from issue_time, or from the deprecated
// issued an older node sends alone.
func TestCustodyIssueTimeFallsBack(t *testing.T) {
	old, cur := time.Unix(1_790_000_000, 0).UTC(), time.Unix(1_790_000_600, 0).UTC()
	tests := []struct {
		name string
		req  *castv1.CustodyRequest
		want time.Time
	}{
		{"both", &castv1.CustodyRequest{IssueTime: timestamppb.New(cur), Issued: timestamppb.New(old)}, cur},
		{"older node", &castv1.CustodyRequest{Issued: timestamppb.New(old)}, old},
		{"new only", &castv1.CustodyRequest{IssueTime: timestamppb.New(cur)}, cur},
	}
	for _, tc := range tests {
		if got := issueTime(tc.req); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
