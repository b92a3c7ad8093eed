package web

import (
	"errors"
	"mime"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/validate"
)

// errorWriter writes a refusal in the protocol of the request: Connect
// (unary or streaming), gRPC-Web or gRPC; Connect's unary JSON for a
// request in none of them.
var errorWriter = connect.NewErrorWriter()

// refuse answers r with err as the API answers it (h.refusal: its code and
// ErrorInfo reason), in r's protocol, so a client reads the listener's own
// refusals as it reads the API's.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if werr := errorWriter.Write(w, r, connectError(h.refusal(err))); werr != nil {
		h.lg.Debug("web refusal not sent", zap.Error(werr))
	}
}

// connectError is the gRPC status err as a Connect error: the same code
// (Connect numbers its codes as gRPC does), message and details.
func connectError(err error) *connect.Error {
	st := status.Convert(err)
	ce := connect.NewError(connect.Code(st.Code()), errors.New(st.Message()))
	for _, d := range st.Proto().GetDetails() {
		m, err := d.UnmarshalNew()
		if err != nil {
			continue
		}
		if det, err := connect.NewErrorDetail(m); err == nil {
			ce.AddDetail(det)
		}
	}
	return ce
}

// apiMethod is the method path ("/cast.v1.Service/Method") names, by the
// registry the transcoder resolves methods in too.
func apiMethod(path string) (protoreflect.MethodDescriptor, bool) {
	name := protoreflect.FullName(strings.Replace(strings.TrimPrefix(path, "/"), "/", ".", 1))
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return nil, false
	}
	m, ok := d.(protoreflect.MethodDescriptor)
	return m, ok
}

// rpcMediaTypes are the Content-Types the transcoder serves: Connect
// unary and streaming, gRPC-Web and gRPC, each in protobuf or JSON.
var rpcMediaTypes = map[string]bool{
	"application/json": true, "application/proto": true,
	"application/connect+json": true, "application/connect+proto": true,
	"application/grpc-web": true, "application/grpc-web+proto": true, "application/grpc-web+json": true,
	"application/grpc": true, "application/grpc+proto": true, "application/grpc+json": true,
}

// callRefusal is why r is no call the transcoder can hand the gRPC server
// (nil when it is one): the transcoder's own answers to these are plain
// text without a code or reason.
func callRefusal(r *http.Request) error {
	m, ok := apiMethod(r.URL.Path)
	if !ok {
		return errs.UnknownMethod(r.URL.Path)
	}
	if r.Method != http.MethodPost {
		// Connect's GET is for methods without side effects; no cast
		// method is declared so.
		return errs.Invalid("%s takes POST only, not %s", m.FullName(), validate.Show(r.Method))
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || !rpcMediaTypes[mt] {
		return errs.Invalid("Content-Type %s is no RPC protocol the web listener serves: send Connect (application/json, application/proto), gRPC-Web or gRPC", validate.Show(ct))
	}
	return nil
}

// refusingJSON is vanguard's JSON codec, whose failure to decode a
// request is answered as the API answers a malformed request
// (INVALID_ARGUMENT with its reason); the transcoder answered it "unknown"
// without one. A field the message does not have is still dropped, as the
// gRPC API ignores one: a newer app may talk to an older replica.
type refusingJSON struct {
	*vanguard.JSONCodec
	refusal func(error) error
}

func (c refusingJSON) Unmarshal(data []byte, msg proto.Message) error {
	if err := c.JSONCodec.Unmarshal(data, msg); err != nil {
		return connectError(c.refusal(errs.Invalid("the request is not a valid %s in JSON (%v)", msg.ProtoReflect().Descriptor().FullName(), err)))
	}
	return nil
}
