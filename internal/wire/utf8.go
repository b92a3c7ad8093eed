package wire

import (
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// InvalidUTF8Field names the first string field of the wire-encoded message
// b (of type md) that is not valid UTF-8, as a path from md
// ("messages[2].text"), or "" when none is found. protobuf's unmarshal error
// says only that some string field is invalid; a client needs to know which.
func InvalidUTF8Field(b []byte, md protoreflect.MessageDescriptor) string {
	return invalidUTF8In(b, md, 0)
}

// maxUTF8Depth bounds the walk on hostile nesting; protobuf's own limit is 10000,
// far beyond any cast message.
const maxUTF8Depth = 100

func invalidUTF8In(b []byte, md protoreflect.MessageDescriptor, depth int) string {
	if depth > maxUTF8Depth {
		return ""
	}
	counts := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		index := counts[num]
		counts[num]++
		if typ != protowire.BytesType || fd == nil {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ""
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		name := string(fd.Name())
		if fd.IsList() {
			name += "[" + strconv.Itoa(index) + "]"
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return name
			}
		case protoreflect.MessageKind:
			if inner := invalidUTF8In(v, fd.Message(), depth+1); inner != "" {
				return name + "." + inner
			}
		}
	}
	return ""
}
