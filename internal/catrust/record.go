// Package catrust is the control plane's TLS trust: the record of its CAs
// (the signing one, the ones trusted beside it during a rotation, the
// retired ones), the set a replica trusts and signs with, built from one
// revision of that record, and the rotation's three steps. It knows
// nothing of gRPC or etcd: the store keeps the record (its Store), the
// control plane's handlers call the steps.
package catrust

import "time"

// Record is the control plane's TLS CA: its certificate and its private
// key sealed by the caller (secrets.Box), never in clear. An operator's
// CA (Operator) is kept without its key: every replica reads that from
// the operator's file.
type Record struct {
	CertPEM   []byte `json:"cert_pem"`
	SealedKey []byte `json:"sealed_key,omitempty"`
	Operator  bool   `json:"operator,omitempty"`
	// Others are CAs trusted beside the signing one during a rotation
	// (carotation.go): the next one before ActivateCA, the old one after.
	Others []OtherCA `json:"others,omitempty"`
	// Retired are the pins of CAs no longer trusted, so a refusal can
	// say why.
	Retired []RetiredCA `json:"retired,omitempty"`
	// Rev is the record's etcd revision (ReplaceCA compares it).
	Rev int64 `json:"-"`
}

// CA states during a rotation.
const (
	Next = "next" // trusted, signs after ActivateCA
	Old  = "old"  // trusted until RetireCA, signs no more
)

// OtherCA is a CA trusted beside the signing one. A next CA's key is
// sealed like the signing one's; an old CA keeps no key (it never signs
// again).
type OtherCA struct {
	CertPEM   []byte    `json:"cert_pem"`
	SealedKey []byte    `json:"sealed_key,omitempty"`
	State     string    `json:"state"`
	Since     time.Time `json:"since"`
}

// RetiredCA is a CA no longer trusted.
type RetiredCA struct {
	Pin     string    `json:"pin"`
	Subject string    `json:"subject"`
	CertPEM []byte    `json:"cert_pem"`
	At      time.Time `json:"at"`
}

// Other returns the other CA in state, if any.
func (r Record) Other(state string) (OtherCA, bool) {
	for _, o := range r.Others {
		if o.State == state {
			return o, true
		}
	}
	return OtherCA{}, false
}

// CertIssue is the latest certificate a credential got from one CA.
type CertIssue struct {
	Cred      string    `json:"cred"`
	Role      string    `json:"role"`
	Name      string    `json:"name"`
	IssuerPin string    `json:"issuer_pin"`
	Issued    time.Time `json:"issued"`
	Expires   time.Time `json:"expires"`
	// Trusts are the pins of the bundle handed out with the certificate:
	// a replica that has not reloaded a rotation yet hands out one
	// without the new CA, however late it signs.
	Trusts []string `json:"trusts,omitempty"`
}
