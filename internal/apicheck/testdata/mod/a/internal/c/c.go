package c

// Promote's methods are promoted into a.T.
type Promote struct{}

// Promoted is one of them.
func (Promote) Promoted() {}

// PtrPromoted needs a *T.
func (*Promote) PtrPromoted() {}
