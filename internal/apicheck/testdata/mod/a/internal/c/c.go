package c

// Promote's methods are promoted into a.T.
type Promote struct {
	// Deprecated: a deprecated field of an internal type.
	Level int
}

// Promoted is one of them.
func (Promote) Promoted() {}

// PtrPromoted needs a *T.
func (*Promote) PtrPromoted() {}
