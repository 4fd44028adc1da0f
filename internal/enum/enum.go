// Package enum names the values of holdfast's small integer enums: the
// one String of classify.Class, retry.StopReason, readiness.State, the
// blue/green phases and the fakes' enums.
package enum

import "strconv"

// Name returns names[v], the name of value v of enum type typ, or
// "typ(v)", such as "Phase(9)", when v has none: it is out of the range
// of names, or its entry is empty (an enum that starts at 1 leaves
// names[0] empty).
func Name[E ~int](typ string, v E, names []string) string {
	if v >= 0 && int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}
