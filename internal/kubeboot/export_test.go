package kubeboot

import "time"

// SetNow replaces p's clock.
func (p *Publisher) SetNow(now func() time.Time) { p.now = now }
