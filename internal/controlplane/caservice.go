package controlplane

import (
	"context"
	"crypto/x509"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
)

// CABundleHeader is the reply header naming the trust bundle (its
// pki.BundleHash): a client whose copy differs fetches it (GetCABundle)
// over the connection it just verified.
const CABundleHeader = "cast-ca-bundle"

// sendBundleHeader names the bundle in a unary call's reply headers.
func (s *Server) sendBundleHeader(ctx context.Context) {
	if set := s.cas(); set != nil {
		_ = grpc.SetHeader(ctx, s.bundleHeader(set))
	}
}

// bundleMD is the reply header of one trust set.
type bundleMD struct {
	set *catrust.Set
	md  metadata.MD
}

// bundleHeader is set's reply header, built once per set (a set never
// changes; a rotation makes a new one) rather than on every call: grpc
// copies it into the reply's headers and does not change it.
func (s *Server) bundleHeader(set *catrust.Set) metadata.MD {
	if b := s.bundleMD.Load(); b != nil && b.set == set {
		return b.md
	}
	b := &bundleMD{set: set, md: metadata.Pairs(CABundleHeader, set.Hash)}
	s.bundleMD.Store(b)
	return b.md
}

func (h *authService) GetCABundle(context.Context, *castv1.GetCABundleRequest) (*castv1.GetCABundleResponse, error) {
	set := h.s.cas()
	if set == nil {
		return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "this control plane serves plaintext (--insecure): it has no CA"))
	}
	return &castv1.GetCABundleResponse{Bundle: set.Bundle, Hash: set.Hash}, nil
}

func (h *authService) GetCAStatus(ctx context.Context, _ *castv1.GetCAStatusRequest) (*castv1.GetCAStatusResponse, error) {
	set := h.s.cas()
	if set == nil {
		return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonCAState, "this control plane serves plaintext (--insecure): it has no CA"))
	}
	rec, _, err := h.s.store.GetCA(ctx)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	issues, err := h.s.store.CertIssues(ctx, time.Now())
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	out := &castv1.GetCAStatusResponse{BundleHash: set.Hash}
	if c, err := pki.ParseCert(rec.CertPEM); err == nil {
		out.Cas = append(out.Cas, caInfo(c, "signing", time.Time{}))
	}
	for _, o := range rec.Others {
		if c, err := pki.ParseCert(o.CertPEM); err == nil {
			out.Cas = append(out.Cas, caInfo(c, o.State, o.Since))
		}
	}
	for _, c := range issues {
		out.Holders = append(out.Holders, &castv1.CertHolder{Principal: c.Role + ":" + c.Name, IssuerPin: c.IssuerPin,
			IssueTimeUnix: c.Issued.Unix(), ExpireTimeUnix: c.Expires.Unix(),
			IssueTime: timestamppb.New(c.Issued), ExpireTime: timestamppb.New(c.Expires)})
	}
	return out, nil
}

func caInfo(c *x509.Certificate, state string, since time.Time) *castv1.CAInfo {
	info := &castv1.CAInfo{Pin: pki.Pin(c), Subject: c.Subject.CommonName, State: state,
		ExpireTimeUnix: c.NotAfter.Unix(), ExpireTime: timestamppb.New(c.NotAfter)}
	if !since.IsZero() {
		info.SinceUnix, info.StateTime = since.Unix(), timestamppb.New(since)
	}
	return info
}

func otherInfo(o catrust.OtherCA) *castv1.CAInfo {
	c, err := pki.ParseCert(o.CertPEM)
	if err != nil {
		return &castv1.CAInfo{State: o.State}
	}
	return caInfo(c, o.State, o.Since)
}

func (h *authService) RotateCA(ctx context.Context, req *castv1.RotateCARequest) (*castv1.RotateCAResponse, error) {
	m, err := h.s.rotation()
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	rec, err := m.Rotate(ctx, req.CertPem, req.KeyPem)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	next, _ := rec.Other(catrust.Next)
	info := otherInfo(next)
	h.s.lg.Warn("tls CA rotation started: the new CA is trusted, the old one still signs", zap.String("next_pin", info.Pin),
		zap.Bool("operator_ca", len(req.CertPem) > 0), zap.String("by", caller(ctx)))
	return &castv1.RotateCAResponse{Next: info}, nil
}

func (h *authService) ActivateCA(ctx context.Context, req *castv1.ActivateCARequest) (*castv1.ActivateCAResponse, error) {
	m, err := h.s.rotation()
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	rec, err := m.Activate(ctx, req.Force)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	c, err := pki.ParseCert(rec.CertPEM)
	if err != nil {
		return nil, toStatus(h.s.lg, errs.Internal(err, "parse CA"))
	}
	h.s.lg.Warn("tls CA activated: the new CA signs, the old one is still trusted", zap.String("ca_pin", pki.Pin(c)),
		zap.Bool("forced", req.Force), zap.String("by", caller(ctx)))
	return &castv1.ActivateCAResponse{Signing: caInfo(c, "signing", time.Time{})}, nil
}

func (h *authService) RetireCA(ctx context.Context, req *castv1.RetireCARequest) (*castv1.RetireCAResponse, error) {
	m, err := h.s.rotation()
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	_, old, err := m.Retire(ctx, req.Force)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	info := otherInfo(old)
	info.State = "retired"
	h.s.lg.Warn("tls CA retired: its certificates are refused", zap.String("retired_pin", info.Pin),
		zap.Bool("forced", req.Force), zap.String("by", caller(ctx)))
	return &castv1.RetireCAResponse{Retired: info}, nil
}
