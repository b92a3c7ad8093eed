package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// DefaultIdleTimeout is how long a kept-alive connection may wait for its
// next request.
const DefaultIdleTimeout = 2 * time.Minute

// MaxMessageBytes bounds one message through the transcoder, either way.
const MaxMessageBytes = 64 << 20

// Server is the web app's listener.
type Server struct {
	cfg    Config
	Logins *Logins
	srv    *http.Server
	lis    net.Listener
	done   chan struct{}
}

// Start serves the app on cfg.Listen, its API through g (every service
// registered on it, by Connect and gRPC-Web), with tlsCfg unless cfg.Plain.
//
// oidc, when set, adds the browser's sign-in with the identity provider.
//
// grants keeps the sign-ins (the control plane's store).
func Start(cfg Config, g *grpc.Server, grants Grants, tlsCfg *tls.Config, oidc *OIDC, lg *zap.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Plain && tlsCfg == nil {
		return nil, errors.New("web: HTTPS needs the control plane's TLS (or plain HTTP on loopback)")
	}
	// A message vanguard buffers (a Connect unary call) is bounded as the
	// CLI's replies are: pages stay under 64 MiB (store.Config.PageBytes).
	api, err := vanguardgrpc.NewTranscoder(g, vanguard.WithDefaultServiceOptions(vanguard.WithMaxMessageBufferBytes(MaxMessageBytes)),
		vanguard.WithCodec(func(res vanguard.TypeResolver) vanguard.Codec {
			return refusingJSON{JSONCodec: vanguard.NewJSONCodec(res), refusal: cfg.Refusal}
		}))
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	s := &Server{cfg: cfg, Logins: NewLogins(grants, cfg.CodeTTL, cfg.SessionTTL), lis: lis, done: make(chan struct{})}
	h := NewHandler(s.Logins, api, !cfg.Plain, cfg.PublicURL, cfg.Refusal, lg)
	h.callLimits = cfg.CallLimits
	if oidc != nil {
		h.oidc = newOIDCFlow(*oidc, s.URL()+"/auth/oidc/callback", s.Logins, h.https(), lg)
	}
	// No write timeout: WatchSession streams for as long as a page is open;
	// and no read timeout either, as net/http then cancels a request whose
	// body is read once it passes (the stream's). The idle timeout counts
	// only between requests (on HTTP/2, while no stream is open), so it
	// cuts no stream; without it a kept-alive connection is held for ever.
	idle := cfg.idleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle}
	if !cfg.Plain {
		s.srv.TLSConfig = tlsCfg
	}
	go func() {
		defer close(s.done)
		var err error
		if cfg.Plain {
			err = s.srv.Serve(lis)
		} else {
			err = s.srv.ServeTLS(lis, "", "")
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("web serve failed", zap.Error(err))
		}
	}()
	return s, nil
}

// URL is where a browser finds the app.
func (s *Server) URL() string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "https"
	if s.cfg.Plain {
		scheme = "http"
	}
	return scheme + "://" + s.lis.Addr().String()
}

// LoginURL makes a one-time login link for code.
func (s *Server) LoginURL(code string) string { return s.URL() + "/auth/login?code=" + code }

// Stop ends the listener and every open stream.
func (s *Server) Stop(ctx context.Context) {
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}
